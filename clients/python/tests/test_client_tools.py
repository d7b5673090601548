"""Executions that wait for the agent's own tools (`client_tools`)."""

from __future__ import annotations

from typing import Any

import pytest
from airlock_client import AirlockApiError, Client, ClientResult, ClientTool

LOOKUP = ClientTool(
    name="lookup",
    description="Looks up a key in the agent's own store",
    input_schema={
        "type": "object",
        "properties": {"key": {"type": "string"}},
        "required": ["key"],
    },
)

TWO_LOOKUPS = """
const [a, b] = await Promise.all([
  tools.client.lookup({ key: "alpha" }),
  tools.client.lookup({ key: "beta" }),
]);
const echoed = await tools.everything.echo({ message: `${a.value}+${b.value}` });
({ a, b, echoed })
"""


def test_waiting_execution_answered_in_two_batches(client: Client) -> None:
    r = client.execute(TWO_LOOKUPS, client_tools=[LOOKUP])
    try:
        assert r.status == "waiting", r.error
        assert r.waiting and not r.finished
        assert r.session is not None and r.session.startswith("ses_")
        assert [(p.id, p.tool, p.args) for p in r.pending_calls] == [
            (1, "lookup", {"key": "alpha"}),
            (2, "lookup", {"key": "beta"}),
        ]
        assert [(c.tool, c.outcome) for c in r.tool_calls] == [
            ("client.lookup", "pending"),
            ("client.lookup", "pending"),
        ]
        assert r.determinism is not None
        assert len(r.determinism.seed) == 64 and r.determinism.clock_ms > 0

        # A partial answer: the other call comes back pending.
        again = client.submit_results(r.id, [ClientResult.success(1, {"value": 1})])
        assert again.id == r.id
        assert again.status == "waiting"
        assert [(p.id, p.args) for p in again.pending_calls] == [(2, {"key": "beta"})]

        done = client.submit_results(r.id, {2: {"value": 2}})
        assert done.status == "ok", done.error
        assert done.result == {"a": {"value": 1}, "b": {"value": 2}, "echoed": "Echo: 1+2"}
        assert [(c.tool, c.outcome) for c in done.tool_calls] == [
            ("client.lookup", "ok"),
            ("client.lookup", "ok"),
            ("everything.echo", "ok"),
        ]
        assert done.pending_calls == []
    finally:
        _cancel_if_waiting(client, r.id)

    with pytest.raises(AirlockApiError) as info:
        client.submit_results(r.id, {1: {"value": 1}})
    assert (info.value.status, info.value.code) == (409, "conflict")
    assert info.value.hint


def test_client_tool_error_is_a_tool_error_in_the_program(client: Client) -> None:
    code = """
try {
  await tools.client.lookup({ key: "gamma" });
  "no error"
} catch (e) {
  ({ name: e.name, code: e.code, message: e.message })
}
"""
    r = client.execute(code, client_tools=[LOOKUP])
    try:
        assert r.status == "waiting"
        done = client.submit_results(r.id, [ClientResult.failure(1, "store is offline")])
    finally:
        _cancel_if_waiting(client, r.id)
    assert done.status == "ok"
    assert done.result["name"] == "ToolError"
    assert done.result["code"] == "upstream_error"
    assert "store is offline" in done.result["message"]


def test_contract_check_uses_the_declared_schema(client: Client) -> None:
    r = client.execute('await tools.client.lookup({ name: "x" })', client_tools=[LOOKUP])
    assert r.status == "error"
    assert r.error is not None and r.error.kind == "contract"
    assert "`key`" in r.error.message
    assert r.error.hint is not None and "key: string" in r.error.hint


def test_run_with_client_tools_answers_round_after_round(client: Client) -> None:
    calls: list[Any] = []

    def lookup(args: Any) -> Any:
        """Looks up a key."""
        calls.append(args)
        return {"value": len(args["key"])}

    def explode(args: Any) -> Any:
        raise RuntimeError("boom")

    code = """
const first = await tools.client.lookup({ key: "abc" });
const second = await tools.client.lookup({ key: "abcdefg" });
let failure = "";
try { await tools.client.explode({}); } catch (e) { failure = e.message; }
({ total: first.value + second.value, failure })
"""
    r = client.run_with_client_tools(code, {"lookup": lookup, "explode": explode})
    assert r.status == "ok", r.error
    assert r.result["total"] == 10
    assert "RuntimeError: boom" in r.result["failure"]
    assert calls == [{"key": "abc"}, {"key": "abcdefg"}]


def test_cancel_a_waiting_execution(client: Client) -> None:
    r = client.execute("await tools.client.lookup({ key: 'k' })", client_tools=[LOOKUP])
    assert r.status == "waiting"
    assert client.cancel(r.id) == "cancelled"
    with pytest.raises(AirlockApiError) as info:
        client.submit_results(r.id, {1: "late"})
    assert info.value.code in ("conflict", "not_found")
    assert info.value.status in (409, 404)


def test_stateless_form_with_client_results_and_determinism(client: Client) -> None:
    code = "const r = await tools.client.lookup({ key: 'k' }); ({ r, rnd: Math.random() })"
    first = client.execute(code, client_tools=[LOOKUP])
    try:
        assert first.status == "waiting"
        assert first.determinism is not None
        second = client.execute(
            code,
            client_tools=[LOOKUP],
            client_results=[ClientResult.success(1, "v")],
            determinism=first.determinism,
        )
        assert second.status == "ok", second.error
        assert second.result["r"] == "v"
        # The same clock and seed give the same randomness.
        third = client.execute(
            code,
            client_tools=[LOOKUP],
            client_results={1: "v"},
            determinism={"clock_ms": first.determinism.clock_ms, "seed": first.determinism.seed},
        )
        assert third.result == second.result
    finally:
        _cancel_if_waiting(client, first.id)


def test_client_sdk_types_the_client_tools(client: Client) -> None:
    files = client.client_sdk([LOOKUP])
    assert "servers/client/lookup.ts" in files
    assert "key: string" in files["servers/client/lookup.ts"]
    assert "tools.d.ts" in files and "client" in files["tools.d.ts"]


def _cancel_if_waiting(client: Client, execution_id: str) -> None:
    """Waiting executions count against the principal's limit until they end: never leave one."""
    try:
        if client.status(execution_id).status == "waiting":
            client.cancel(execution_id)
    except AirlockApiError:
        pass
