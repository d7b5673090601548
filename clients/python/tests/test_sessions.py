"""Sessions and the retry loop: a failed program fixed and re-run in the same session, its
successful tool calls answered from the journal instead of made again."""

from __future__ import annotations

import re

import pytest
from airlock_client import AirlockApiError, Client, ExecutionResponse

FIRST = """const s = await tools.everything.get_sum({ a: 2, b: 3 });
const n = s.result.value;
n * 10"""


def fix_from_explanation(code: str, response: ExecutionResponse) -> str | None:
    """What an agent does: keep the lines before the failing one, and rewrite that line from
    what the error says the value really is."""
    error = response.error
    assert error is not None and error.line is not None and error.explanation is not None
    m = re.match(
        r"(\w+)\.\w+ is undefined: \1 is the result of [\w.]+ \(line \d+\), a string",
        error.explanation,
    )
    if m is None:
        return None
    name = m.group(1)
    lines = code.split("\n")
    kept = lines[: error.line - 1]
    rest = lines[error.line :]
    return "\n".join(kept + [f"const n = Number(/is (-?\\d+)/.exec({name})![1]);"] + rest)


def test_retry_loop_fixes_the_program_in_the_same_session(client: Client) -> None:
    seen: list[ExecutionResponse] = []

    def fix(response: ExecutionResponse) -> str | None:
        seen.append(response)
        return fix_from_explanation(FIRST, response)

    outcome = client.run_with_retries(FIRST, fix, max_attempts=3)
    assert outcome.ok, outcome.response.error
    assert outcome.response.result == 50
    assert len(outcome.attempts) == 2
    assert len(seen) == 1

    first, second = outcome.attempts
    assert first.code == FIRST
    assert first.response.status == "error"
    assert first.response.error is not None and first.response.error.line == 2
    assert "Number(/is (-?\\d+)/.exec(s)![1])" in second.code
    assert second.code.split("\n")[0] == FIRST.split("\n")[0]  # the good line kept as it was

    session = outcome.session
    assert session is not None and session.startswith("ses_")
    assert first.response.session == session
    assert second.response.session == session
    # The first run made the call; the second got it from the journal.
    assert [(c.tool, c.replayed) for c in first.response.tool_calls] == [
        ("everything.get_sum", False)
    ]
    assert [(c.tool, c.replayed) for c in second.response.tool_calls] == [
        ("everything.get_sum", True)
    ]
    assert second.response.replayed_calls == 1

    detail = client.session(session)
    assert detail.session.id == session
    assert [(c.tool, c.state, c.sends) for c in detail.calls] == [("everything.get_sum", "ok", 1)]
    assert sorted((e.id, e.status) for e in detail.executions) == sorted(
        [(first.response.id, "error"), (second.response.id, "ok")]
    )
    assert session in [s.id for s in client.sessions()]
    assert first.response.id in [e.id for e in client.executions(status="error")]

    # Only an interrupted execution can be resumed.
    with pytest.raises(AirlockApiError) as info:
        client.resume(second.response.id)
    assert (info.value.status, info.value.code) == (409, "conflict")
    assert info.value.hint

    client.delete_session(session)
    with pytest.raises(AirlockApiError) as info:
        client.session(session)
    assert (info.value.status, info.value.code) == (404, "not_found")
    assert session not in [s.id for s in client.sessions()]


def test_retry_loop_gives_up_when_fix_returns_none(client: Client) -> None:
    outcome = client.run_with_retries("const x = ;", lambda r: None)
    assert len(outcome.attempts) == 1
    assert outcome.response.status == "error"
    assert outcome.response.error is not None and outcome.response.error.kind == "syntax"
    client.delete_session(outcome.session or "")


def test_retry_loop_stops_at_max_attempts(client: Client) -> None:
    calls = []

    def fix(response: ExecutionResponse) -> str:
        calls.append(response.id)
        return f"throw new Error('still broken {len(calls)}')"

    outcome = client.run_with_retries("throw new Error('broken')", fix, max_attempts=3)
    assert len(outcome.attempts) == 3
    assert len(calls) == 2  # no fix asked for after the last attempt
    assert [a.response.error.message for a in outcome.attempts if a.response.error] == [
        "broken",
        "still broken 1",
        "still broken 2",
    ]
    assert len({a.response.session for a in outcome.attempts}) == 1
    client.delete_session(outcome.session or "")


def test_retry_loop_does_not_retry_success_or_use_a_session_when_told_not_to(
    client: Client,
) -> None:
    def fix(response: ExecutionResponse) -> str:
        raise AssertionError("fix must not be called for a program that worked")

    outcome = client.run_with_retries("6 * 7", fix, session=None)
    assert outcome.ok and outcome.response.result == 42
    assert len(outcome.attempts) == 1
    assert outcome.session is None
