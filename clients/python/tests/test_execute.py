"""Plain executions: values, console output, failures with their hints, tool calls."""

from __future__ import annotations

import os

from airlock_client import Client


def test_execute_returns_value_console_and_stats(client: Client) -> None:
    code = """
interface P { name: string; moons: number }
const ps: P[] = [{ name: "Earth", moons: 1 }, { name: "Mars", moons: 2 }];
console.log("planets:", ps.length);
console.info("info line");
console.warn("careful");
({ names: ps.map((p) => p.name), moons: ps.reduce((s, p) => s + p.moons, 0) })
"""
    r = client.execute(code)
    assert r.status == "ok", r.error
    assert r.ok and not r.failed and r.finished
    assert r.result == {"names": ["Earth", "Mars"], "moons": 3}
    assert r.stdout == "planets: 2\ninfo line\n"
    assert r.stderr == "careful\n"
    assert r.error is None
    assert r.tool_calls == []
    assert r.id.startswith("ex_")
    assert r.session is None  # one-shot: no session asked for
    assert r.peer is not None and r.peer.uid == os.geteuid()
    assert r.principal
    assert r.stats.total_ms > 0
    assert r.raw["result"] == r.result


def test_execute_runtime_error_has_position_and_excerpt(client: Client) -> None:
    code = "const xs = [1, 2, 3];\nconst total = xs.reduce((a, b) => a + b, 0);\nconst y = (xs as any).first.value;\ntotal"
    r = client.execute(code)
    assert r.status == "error"
    assert r.failed
    assert r.result is None
    assert r.error is not None
    assert r.error.kind == "runtime"
    assert r.error.name == "TypeError"
    assert "value" in r.error.message
    assert r.error.line == 3
    assert r.error.column is not None and r.error.column > 1
    assert r.error.excerpt is not None
    assert "> 3 | const y = (xs as any).first.value;" in r.error.excerpt
    assert "^" in r.error.excerpt
    described = r.error.describe()
    assert "runtime error at line 3" in described and "first.value" in described


def test_execute_syntax_error_has_hint(client: Client) -> None:
    r = client.execute("const x = ;")
    assert r.status == "error"
    assert r.error is not None
    assert r.error.kind == "syntax"
    assert (r.error.line, r.error.column) == (1, 11)
    assert r.error.hint is not None and "syntax" in r.error.hint


def test_javascript_language_rejects_type_annotations(client: Client) -> None:
    code = "const n: number = 2; n * 21"
    assert client.execute(code).result == 42
    r = client.execute(code, language="javascript")
    assert r.status == "error"
    assert r.error is not None and r.error.kind == "syntax"
    assert client.execute("const n = 2; n * 21", language="javascript").result == 42


def test_timeout(client: Client) -> None:
    r = client.execute("let i = 0; while (true) { i++ }", timeout_ms=300)
    assert r.status == "timeout"
    assert r.failed
    assert r.error is not None and r.error.kind == "timeout"
    assert r.error.hint is not None and "timeout_ms" in r.error.hint


def test_tool_calls_through_everything(client: Client) -> None:
    code = """
const [echo, sum] = await Promise.all([
  tools.everything.echo({ message: "hello airlock" }),
  tools.everything.get_sum({ a: 20, b: 22 }),
]);
({ echo, sum })
"""
    r = client.execute(code)
    assert r.status == "ok", r.error
    assert r.result == {"echo": "Echo: hello airlock", "sum": "The sum of 20 and 22 is 42."}
    assert [c.tool for c in r.tool_calls] == ["everything.echo", "everything.get_sum"]
    assert [c.id for c in r.tool_calls] == [1, 2]
    assert r.tool_calls[0].args == {"message": "hello airlock"}
    assert r.tool_calls[1].args == {"a": 20, "b": 22}
    for call in r.tool_calls:
        assert call.outcome == "ok"
        assert call.error is None
        assert not call.replayed
        assert call.duration_ms > 0
        # A program that succeeded keeps the tools' results out of the answer.
        assert not call.has_result
    assert r.replayed_calls == 0


def test_contract_error_names_the_expected_argument(client: Client) -> None:
    r = client.execute('await tools.everything.echo({ text: "hi" })')
    assert r.status == "error"
    assert r.error is not None
    assert r.error.kind == "contract"
    assert "`message`" in r.error.message
    assert r.error.hint == "the tool takes tools.everything.echo({ message: string })"
    assert r.error.line == 1
    assert r.error.excerpt is not None and r.error.excerpt.startswith("> 1 |")
    assert r.tool_calls == []  # nothing of it ran


def test_unknown_tool_suggests_the_right_one(client: Client) -> None:
    r = client.execute("await tools.everything.add({ a: 1, b: 2 })")
    assert r.status == "error"
    assert r.error is not None
    assert r.error.hint is not None and "tools.everything.get_sum" in r.error.hint
    # Whether refused before running (contract) or at the call (runtime ToolError), the
    # daemon names the tool meant.
    assert r.error.kind in ("contract", "runtime")
    if r.tool_calls:
        call = r.tool_calls[0]
        assert call.outcome == "error"
        assert call.error is not None and call.error.code == "unknown_tool"
        assert call.error.hint is not None and "get_sum" in call.error.hint


def test_failed_program_shows_what_its_calls_returned(client: Client) -> None:
    code = "const s = await tools.everything.get_sum({ a: 2, b: 3 });\nconst n = s.result.value;\nn"
    r = client.execute(code)
    assert r.status == "error"
    assert r.error is not None and r.error.kind == "runtime"
    assert r.error.line == 2
    assert r.error.explanation is not None
    assert "tools.everything.get_sum" in r.error.explanation
    assert "a string" in r.error.explanation
    assert r.error.hint is not None and r.error.explanation in r.error.hint
    call = r.tool_calls[0]
    assert call.has_result and call.result == "The sum of 2 and 3 is 5."
