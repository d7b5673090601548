"""Refused requests raise AirlockApiError with the daemon's code, message and hint."""

from __future__ import annotations

import os

import pytest
from airlock_client import (
    AirlockApiError,
    AirlockConnectionError,
    AirlockError,
    Client,
    default_socket_path,
    resolve_socket_path,
)


def test_missing_sdk_file(client: Client) -> None:
    with pytest.raises(AirlockApiError) as info:
        client.sdk_file("servers/nope/nothing.ts")
    e = info.value
    assert (e.status, e.code) == (404, "not_found")
    assert "nothing.ts" in e.message
    assert e.hint == "GET /v1/sdk lists the files; start with README.md"
    assert "not_found" in str(e) and "hint: GET /v1/sdk" in str(e)
    assert isinstance(e, AirlockError)


def test_invalid_timeout(client: Client) -> None:
    with pytest.raises(AirlockApiError) as info:
        client.execute("1", timeout_ms=0)
    assert (info.value.status, info.value.code) == (400, "invalid_timeout")
    assert info.value.hint is not None and "timeout_ms" in info.value.hint


def test_bad_replay_mode_is_invalid_json(client: Client) -> None:
    with pytest.raises(AirlockApiError) as info:
        client.execute("1", session="new", replay="sometimes")
    assert (info.value.status, info.value.code) == (400, "invalid_json")
    assert "sometimes" in info.value.message
    assert info.value.hint is not None and '"replay"' in info.value.hint


def test_unknown_session(client: Client) -> None:
    with pytest.raises(AirlockApiError) as info:
        client.execute("1", session="ses_00000000000000000000000000000000")
    assert (info.value.status, info.value.code) == (404, "not_found")
    assert info.value.hint is not None and '"new"' in info.value.hint


def test_empty_search(client: Client) -> None:
    with pytest.raises(AirlockApiError) as info:
        client.search_tools("   ")
    assert (info.value.status, info.value.code) == (400, "bad_request")
    assert info.value.hint


def test_unknown_status_filter(client: Client) -> None:
    with pytest.raises(AirlockApiError) as info:
        client.executions(status="bogus")
    assert (info.value.status, info.value.code) == (400, "bad_request")
    assert info.value.hint is not None and "interrupted" in info.value.hint


def test_connection_error_names_the_socket(tmp_path: os.PathLike[str]) -> None:
    missing = os.path.join(os.fspath(tmp_path), "no-daemon.sock")
    with Client(missing) as c, pytest.raises(AirlockConnectionError) as info:
        c.health()
    assert info.value.socket_path == missing
    assert missing in str(info.value) and "is airlockd running" in str(info.value)


def test_socket_discovery(monkeypatch: pytest.MonkeyPatch, sock: str) -> None:
    assert resolve_socket_path("/x/y.sock") == "/x/y.sock"
    monkeypatch.setenv("AIRLOCK_SOCKET", sock)
    assert resolve_socket_path() == sock
    assert Client().socket_path == sock
    monkeypatch.delenv("AIRLOCK_SOCKET")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/nonexistent-runtime")
    expected = (
        "/run/airlock/airlock.sock"
        if os.geteuid() == 0
        else "/nonexistent-runtime/airlock/airlock.sock"
    )
    if os.geteuid() != 0 and os.path.exists("/run/airlock/airlock.sock"):
        expected = "/run/airlock/airlock.sock"  # the system daemon's, when the user has none
    assert default_socket_path() == expected
    assert resolve_socket_path() == expected
