"""NDJSON streaming: typed events as they happen, ending with the result."""

from __future__ import annotations

import time

import pytest
from airlock_client import (
    AirlockApiError,
    Client,
    ConsoleEvent,
    ProgressEvent,
    ResultEvent,
    StartedEvent,
    ToolCallFinishedEvent,
    ToolCallStartedEvent,
    ToolProgressEvent,
)

LONG_OP = "tools.everything.trigger_long_running_operation"


def test_stream_yields_events_as_they_happen(client: Client) -> None:
    code = f"""
console.log("before");
progress({{ stage: "start" }});
const r = await {LONG_OP}({{ duration: 1, steps: 2 }});
console.error("after");
r
"""
    t0 = time.monotonic()
    arrivals: list[tuple[float, object]] = []
    for event in client.stream(code):
        arrivals.append((time.monotonic() - t0, event))
    events = [e for _, e in arrivals]

    assert isinstance(events[0], StartedEvent)
    assert isinstance(events[-1], ResultEvent)
    assert sum(isinstance(e, ResultEvent) for e in events) == 1
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "StartedEvent",
        "ConsoleEvent",
        "ProgressEvent",
        "ToolCallStartedEvent",
        "ToolProgressEvent",
        "ToolProgressEvent",
        "ToolCallFinishedEvent",
        "ConsoleEvent",
        "ResultEvent",
    ], kinds

    before, after = [e for e in events if isinstance(e, ConsoleEvent)]
    assert (before.stream, before.level, before.text) == ("stdout", "log", "before")
    assert (after.stream, after.level, after.text) == ("stderr", "error", "after")
    progress = next(e for e in events if isinstance(e, ProgressEvent))
    assert progress.value == {"stage": "start"}

    started_call = next(e for e in events if isinstance(e, ToolCallStartedEvent))
    assert (started_call.id, started_call.tool) == (1, "everything.trigger_long_running_operation")
    steps = [e for e in events if isinstance(e, ToolProgressEvent)]
    assert [(s.id, s.progress, s.total) for s in steps] == [(1, 1.0, 2.0), (1, 2.0, 2.0)]
    finished = next(e for e in events if isinstance(e, ToolCallFinishedEvent))
    assert finished.outcome == "ok" and finished.duration_ms >= 900

    result = events[-1]
    assert isinstance(result, ResultEvent)
    response = result.response
    assert response.status == "ok"
    assert isinstance(events[0], StartedEvent) and response.id == events[0].id
    assert "Steps: 2" in response.result
    assert response.stdout == "before\n" and response.stderr == "after\n"

    # Real streaming: the events before the one-second tool call arrive while it runs, not
    # with the result (measured between arrivals, so a slow worker start does not matter).
    first_at = arrivals[0][0]
    tool_started_at = next(t for t, e in arrivals if isinstance(e, ToolCallStartedEvent))
    first_step_at = next(t for t, e in arrivals if isinstance(e, ToolProgressEvent))
    result_at = arrivals[-1][0]
    assert result_at - tool_started_at >= 0.8, arrivals
    assert result_at - first_at >= 0.8, arrivals
    assert result_at - first_step_at >= 0.3, arrivals


def test_leaving_the_stream_cancels_the_program(client: Client) -> None:
    stream = client.stream(f"await {LONG_OP}({{ duration: 5, steps: 5 }}); 'done'")
    execution_id = None
    for event in stream:
        if isinstance(event, StartedEvent):
            execution_id = event.id
        if isinstance(event, ToolCallStartedEvent):
            break
    stream.close()  # type: ignore[attr-defined]
    assert execution_id is not None
    # The daemon follows an attached execution only while it runs: once the hang-up has
    # cancelled it, its id is unknown (long before the five-second call could end).
    deadline = time.monotonic() + 3
    while True:
        try:
            status = client.status(execution_id)
        except AirlockApiError as e:
            assert e.status == 404 and e.code == "not_found"
            break
        assert status.status == "running"
        if time.monotonic() > deadline:
            pytest.fail("the execution still runs after its client left the stream")
        time.sleep(0.1)


def test_stream_of_a_failing_program_ends_with_the_error(client: Client) -> None:
    events = list(client.stream('console.log("x"); await tools.everything.echo({ msg: "x" })'))
    assert isinstance(events[0], StartedEvent)
    last = events[-1]
    assert isinstance(last, ResultEvent)
    assert last.response.status == "error"
    assert last.response.error is not None and last.response.error.kind == "contract"
    assert last.response.error.hint is not None and "message: string" in last.response.error.hint


def test_stream_refused_request_raises(client: Client) -> None:
    with pytest.raises(AirlockApiError) as info:
        list(client.stream("1", timeout_ms=0))
    assert info.value.status == 400
    assert info.value.code == "invalid_timeout"
    assert info.value.hint
