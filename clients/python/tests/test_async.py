"""The AsyncClient on the main paths (each test drives its coroutine with asyncio.run)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest
from airlock_client import (
    AirlockApiError,
    AsyncClient,
    ClientResult,
    ClientTool,
    ConsoleEvent,
    ExecutionResponse,
    ResultEvent,
    StartedEvent,
    ToolCallStartedEvent,
    ToolProgressEvent,
)

LOOKUP = ClientTool(
    name="lookup",
    description="Looks up a key",
    input_schema={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
)


def test_async_execute_ok_and_error(sock: str) -> None:
    async def main() -> tuple[ExecutionResponse, ExecutionResponse]:
        async with AsyncClient(sock) as c:
            return await asyncio.gather(
                c.execute('console.log("hi"); await tools.everything.get_sum({ a: 1, b: 41 })'),
                c.execute('await tools.everything.echo({ msg: "x" })'),
            )

    ok, failed = asyncio.run(main())
    assert ok.status == "ok"
    assert ok.result == "The sum of 1 and 41 is 42."
    assert ok.stdout == "hi\n"
    assert [c.tool for c in ok.tool_calls] == ["everything.get_sum"]
    assert failed.status == "error"
    assert failed.error is not None and failed.error.kind == "contract"
    assert failed.error.hint == "the tool takes tools.everything.echo({ message: string })"


def test_async_stream(sock: str) -> None:
    async def main() -> list[tuple[float, Any]]:
        out = []
        async with AsyncClient(sock) as c:
            t0 = time.monotonic()
            async for event in c.stream(
                'console.log("go"); await tools.everything.trigger_long_running_operation({ duration: 1, steps: 2 })'
            ):
                out.append((time.monotonic() - t0, event))
        return out

    arrivals = asyncio.run(main())
    events = [e for _, e in arrivals]
    assert isinstance(events[0], StartedEvent)
    assert events[1] == ConsoleEvent(stream="stdout", level="log", text="go")
    assert isinstance(events[2], ToolCallStartedEvent)
    assert [e.progress for e in events if isinstance(e, ToolProgressEvent)] == [1.0, 2.0]
    last = events[-1]
    assert isinstance(last, ResultEvent) and last.response.status == "ok"
    assert last.response.id == events[0].id
    tool_started_at = next(t for t, e in arrivals if isinstance(e, ToolCallStartedEvent))
    assert arrivals[-1][0] - tool_started_at >= 0.8, arrivals


def test_async_stream_left_early_cancels(sock: str) -> None:
    async def main() -> None:
        async with AsyncClient(sock) as c:
            execution_id = None
            stream = c.stream(
                "await tools.everything.trigger_long_running_operation({ duration: 5, steps: 5 })"
            )
            async with contextlib.aclosing(stream) as events:  # type: ignore[type-var]
                async for event in events:
                    if isinstance(event, StartedEvent):
                        execution_id = event.id
                    if isinstance(event, ToolCallStartedEvent):
                        break
            assert execution_id is not None
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                try:
                    await c.status(execution_id)
                except AirlockApiError as e:
                    assert e.code == "not_found"
                    return
                await asyncio.sleep(0.1)
            pytest.fail("the execution still runs after its client left the stream")

    asyncio.run(main())


def test_async_detached_events_and_cancel(sock: str) -> None:
    async def main() -> None:
        async with AsyncClient(sock) as c:
            execution_id = await c.submit(
                'console.log("a"); await tools.everything.trigger_long_running_operation({ duration: 1, steps: 2 }); console.log("b"); "done"'
            )
            status = await c.status(execution_id)
            assert status.status in ("queued", "running")
            head = []
            async with contextlib.aclosing(c.events(execution_id)) as events:  # type: ignore[type-var]
                async for event in events:
                    head.append(event)
                    if isinstance(event, ToolCallStartedEvent):
                        break
            assert [e.seq for e in head] == list(range(1, len(head) + 1))
            last_seq = head[-1].seq
            assert last_seq is not None
            response = await c.wait(execution_id, after=last_seq)
            assert response.status == "ok" and response.result == "done"
            assert response.stdout == "a\nb\n"
            rest = [e async for e in c.events(execution_id, after=last_seq)]
            assert rest[0].seq == last_seq + 1
            assert isinstance(rest[-1], ResultEvent)

            long_id = await c.submit(
                "await tools.everything.trigger_long_running_operation({ duration: 10, steps: 10 })"
            )
            async with contextlib.aclosing(c.events(long_id)) as events:  # type: ignore[type-var]
                async for event in events:
                    if isinstance(event, ToolCallStartedEvent):
                        break
            assert await c.cancel(long_id) == "cancelling"
            cancelled = await c.wait(long_id)
            assert cancelled.status == "cancelled"
            assert cancelled.error is not None and cancelled.error.kind == "cancelled"

    asyncio.run(main())


def test_async_client_tools(sock: str) -> None:
    async def lookup(args: Any) -> Any:
        await asyncio.sleep(0)
        return {"value": args["key"].upper()}

    async def main() -> tuple[ExecutionResponse, ExecutionResponse, ExecutionResponse]:
        async with AsyncClient(sock) as c:
            waiting = await c.execute(
                "const r = await tools.client.lookup({ key: 'abc' }); r.value + '!'",
                client_tools=[LOOKUP],
            )
            try:
                assert waiting.status == "waiting"
                assert [(p.id, p.tool, p.args) for p in waiting.pending_calls] == [
                    (1, "lookup", {"key": "abc"})
                ]
                done = await c.submit_results(
                    waiting.id, [ClientResult.success(1, {"value": "ABC"})]
                )
            finally:
                if (await c.status(waiting.id)).status == "waiting":
                    await c.cancel(waiting.id)
            helped = await c.run_with_client_tools(
                "const a = await tools.client.lookup({ key: 'x' }); const b = await tools.client.lookup({ key: 'yz' }); a.value + b.value",
                {"lookup": lookup},
                client_tools=[LOOKUP],
            )
            return waiting, done, helped

    _waiting, done, helped = asyncio.run(main())
    assert done.status == "ok" and done.result == "ABC!"
    assert helped.status == "ok" and helped.result == "XYZ"


def test_async_retry_loop_with_async_fix(sock: str) -> None:
    first = "const e = await tools.everything.echo({ message: 'hi' });\nconst t = e.text.toUpperCase();\nt"

    async def fix(response: ExecutionResponse) -> str | None:
        await asyncio.sleep(0)
        error = response.error
        if error is None or error.explanation is None or "a string" not in error.explanation:
            return None
        lines = first.split("\n")
        lines[error.line - 1 if error.line else 1] = "const t = e.toUpperCase();"
        return "\n".join(lines)

    async def main() -> Any:
        async with AsyncClient(sock) as c:
            outcome = await c.run_with_retries(first, fix)
            assert outcome.session is not None
            await c.delete_session(outcome.session)
            return outcome

    outcome = asyncio.run(main())
    assert outcome.ok, outcome.response.error
    assert outcome.response.result == "ECHO: HI"
    assert len(outcome.attempts) == 2
    assert outcome.attempts[1].response.session == outcome.attempts[0].response.session
    assert outcome.attempts[1].response.replayed_calls == 1


def test_async_discovery_and_errors(sock: str) -> None:
    async def main() -> None:
        async with AsyncClient(sock) as c:
            tree, found, listing, health = await asyncio.gather(
                c.sdk(), c.search_tools("echo the message back", limit=3), c.tools(), c.health()
            )
            assert "servers/everything/echo.ts" in tree.paths
            assert "everything.echo" in [r.tool for r in found.results]
            assert listing.find("everything", "get_sum") is not None
            assert health["status"] == "ok"
            assert "message: string" in await c.sdk_file("servers/everything/echo.ts")
            assert isinstance(await c.sessions(), list)
            assert await c.approvals() == []
            with pytest.raises(AirlockApiError) as info:
                await c.sdk_file("nope.ts")
            assert (info.value.status, info.value.code) == (404, "not_found")
            assert info.value.hint
            with pytest.raises(AirlockApiError) as info:
                await c.execute("1", timeout_ms=0)
            assert info.value.code == "invalid_timeout"

    asyncio.run(main())
