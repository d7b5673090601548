"""Discovering tools: the SDK tree and files, search, raw definitions, health, approvals."""

from __future__ import annotations

import pytest
from airlock_client import AirlockApiError, Client


def test_tools_lists_everything_with_schemas(client: Client) -> None:
    listing = client.tools()
    everything = {t.name: t for t in listing.tools if t.namespace == "everything"}
    for name in ("echo", "get_sum", "trigger_long_running_operation"):
        assert name in everything, sorted(everything)
    echo = listing.find("everything", "echo")
    assert echo is not None and echo is everything["echo"]
    assert echo.qualified_name == "everything.echo"
    assert echo.input_schema["required"] == ["message"]
    assert echo.input_schema["properties"]["message"]["type"] == "string"
    assert echo.description
    assert listing.find("everything", "no_such_tool") is None
    assert "everything" not in [u.namespace for u in listing.unavailable]


def test_sdk_tree_and_files(client: Client) -> None:
    tree = client.sdk()
    for path in (
        "README.md",
        "tools.d.ts",
        "tsconfig.json",
        "servers/everything/index.ts",
        "servers/everything/echo.ts",
    ):
        assert path in tree.paths, tree.paths
    assert tree.tools == len(client.tools().tools)
    sizes = {f.path: f.bytes for f in tree.files}

    readme = client.sdk_file("README.md")
    assert "tools.everything" in readme
    assert len(readme.encode()) == sizes["README.md"]

    echo = client.sdk_file("servers/everything/echo.ts")
    assert "message: string" in echo
    assert "tools.everything.echo" in echo
    assert len(echo.encode()) == sizes["servers/everything/echo.ts"]


def test_search_finds_the_tool_by_what_it_does(client: Client) -> None:
    found = client.search_tools("add two numbers", limit=3)
    assert found.query == "add two numbers"
    assert 1 <= len(found.results) <= 3
    # The daemon may serve more namespaces than `everything`: the tool is among the first.
    best = next(r for r in found.results if r.tool == "everything.get_sum")
    assert best.tool == "everything.get_sum"
    assert best.signature.startswith("tools.everything.get_sum({ a: number, b: number })")
    assert best.file == "servers/everything/get_sum.ts"
    assert best.score > 0
    assert best.summary

    echo = client.search_tools("echo the message back", limit=3)
    assert "everything.echo" in [r.tool for r in echo.results]
    assert [r.score for r in echo.results] == sorted((r.score for r in echo.results), reverse=True)


def test_health(client: Client) -> None:
    health = client.health()
    assert health["status"] == "ok"
    assert health["journal"]["status"] == "ok"
    assert health["policy_generation"] >= 1
    assert "pool" in health and "version" in health


def test_approvals_list_and_decision_errors(client: Client) -> None:
    assert client.approvals() == []
    with pytest.raises(AirlockApiError) as info:
        client.decide("apr_does_not_exist", True, reason="test")
    # Not an approver (403), or an approver deciding an approval that does not exist (404).
    assert (info.value.status, info.value.code) in ((403, "not_permitted"), (404, "not_found"))
    assert info.value.hint
