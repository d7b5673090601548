// stream(): NDJSON events as they happen, a tool call's progress, the result last; leaving
// the loop early cancels the execution.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ExecutionEvent } from "../src/index.ts";
import { withoutEventFields } from "../src/index.ts";
import { client, eventually, metric, skipWithoutDaemon } from "./helpers.ts";

describe("stream", { skip: skipWithoutDaemon }, () => {
  it("yields console, progress, tool call and tool progress events as they happen, the result last", async () => {
    const code = [
      'console.log("before");',
      'progress({ stage: "calling" });',
      "const r = await tools.everything.trigger_long_running_operation({ duration: 0.9, steps: 3 });",
      'console.warn("after");',
      "r",
    ].join("\n");
    const start = Date.now();
    const events: { at: number; event: ExecutionEvent }[] = [];
    for await (const event of client().stream({ code })) {
      events.push({ at: Date.now() - start, event });
    }
    const kinds = events.map((e) => e.event.event);
    assert.deepEqual(kinds, [
      "started",
      "console",
      "progress",
      "tool_call_started",
      "tool_progress",
      "tool_progress",
      "tool_progress",
      "tool_call_finished",
      "console",
      "result",
    ]);
    const [started, before, progress, callStarted, p1, p2, p3, callFinished, after, result] = events.map((e) => e.event);
    assert.ok(started?.event === "started");
    assert.match(started.id, /^ex_/);
    assert.ok(before?.event === "console");
    assert.deepEqual([before.stream, before.level, before.text], ["stdout", "log", "before"]);
    assert.ok(progress?.event === "progress");
    assert.deepEqual(progress.value, { stage: "calling" });
    assert.ok(callStarted?.event === "tool_call_started");
    assert.equal(callStarted.tool, "everything.trigger_long_running_operation");
    const steps = [p1, p2, p3].map((p) => {
      assert.ok(p?.event === "tool_progress");
      assert.equal(p.id, callStarted.id);
      assert.equal(p.tool, callStarted.tool);
      return [p.progress, p.total];
    });
    assert.deepEqual(steps, [
      [1, 3],
      [2, 3],
      [3, 3],
    ]);
    assert.ok(callFinished?.event === "tool_call_finished");
    assert.equal(callFinished.outcome, "ok");
    assert.ok(callFinished.duration_ms >= 800, `the call took ${callFinished.duration_ms} ms`);
    assert.ok(after?.event === "console");
    assert.deepEqual([after.stream, after.level, after.text], ["stderr", "warn", "after"]);
    assert.ok(result?.event === "result");
    assert.equal(result.id, started.id);
    assert.equal(result.status, "ok");
    assert.match(String(result.result), /Long running operation completed/);
    assert.equal(result.stdout, "before\n");
    assert.equal(result.stderr, "after\n");
    assert.equal(result.tool_calls.length, 1);

    // Streamed, not buffered: the first events came long before the result.
    const firstAt = events[0]?.at ?? Infinity;
    const resultAt = events.at(-1)?.at ?? 0;
    assert.ok(resultAt - firstAt >= 600, `started at ${firstAt} ms, result at ${resultAt} ms`);

    const response = withoutEventFields(result);
    assert.equal(response.status, "ok");
    assert.equal("event" in response, false);
  });

  it("streams a failed program to a result with the error", async () => {
    const events = [];
    for await (const event of client().stream({ code: 'console.log("x");\nthrow new RangeError("too far");' })) {
      events.push(event);
    }
    const last = events.at(-1);
    assert.ok(last?.event === "result");
    assert.equal(last.status, "error");
    assert.equal(last.error?.name, "RangeError");
    assert.equal(last.error?.message, "too far");
    assert.equal(last.error?.line, 2);
  });

  it("cancels the execution when the loop is left before the result", async () => {
    const c = client();
    const before = metric(await c.metrics(), 'airlock_execution_errors_total{kind="cancelled"}');
    const seen: string[] = [];
    const started = Date.now();
    for await (const event of c.stream({
      code: "await tools.everything.trigger_long_running_operation({ duration: 8, steps: 8 });\n'never'",
    })) {
      seen.push(event.event);
      if (event.event === "tool_call_started") {
        break;
      }
    }
    assert.deepEqual(seen, ["started", "tool_call_started"]);
    await eventually("the cancelled execution in the metrics", async () => {
      const now = metric(await c.metrics(), 'airlock_execution_errors_total{kind="cancelled"}');
      return now > before ? now : undefined;
    });
    assert.ok(Date.now() - started < 6_000, "stopped well before the tool's 8 s");
  });

  it("refuses wait: false (a detached run is followed with events())", () => {
    assert.throws(() => client().stream({ code: "1", wait: false }), TypeError);
  });

  it("throws the API error before any event", async () => {
    await assert.rejects(
      async () => {
        for await (const _ of client().stream({ code: "1", timeout_ms: 0 })) {
          assert.fail("no event expected");
        }
      },
      (e: unknown) => e instanceof Error && (e as { code?: string }).code === "invalid_timeout",
    );
  });
});
