// submit() (wait: false), status(), events() with after and follow, wait(), cancel().

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { NumberedEvent } from "../src/index.ts";
import { apiError, client, collect, eventually, skipWithoutDaemon } from "./helpers.ts";

describe("detached executions", { skip: skipWithoutDaemon }, () => {
  it("submits, shows the run so far, replays events after N, and ends with the result", async () => {
    const c = client();
    const submitted = await c.submit({
      code: [
        'console.log("first");',
        "const r = await tools.everything.trigger_long_running_operation({ duration: 2, steps: 2 });",
        'console.log("second");',
        "({ answer: 42, r })",
      ].join("\n"),
    });
    assert.match(submitted.id, /^ex_/);
    assert.equal(submitted.status, "queued");
    assert.equal(submitted.location, `/v1/executions/${submitted.id}`);
    assert.equal(submitted.events, `/v1/executions/${submitted.id}/events`);

    // While it runs: its output and calls so far.
    const running = await eventually("the tool call in flight", async () => {
      const s = await c.status(submitted.id);
      return s.status === "running" && (s.tool_calls?.length ?? 0) > 0 ? s : undefined;
    });
    assert.equal(running.id, submitted.id);
    assert.equal(running.stdout, "first\n");
    assert.equal(running.tool_calls?.[0]?.tool, "everything.trigger_long_running_operation");
    assert.equal(running.tool_calls?.[0]?.outcome, "pending");
    assert.match(running.session ?? "", /^ses_/, "a detached execution runs in a session");

    // Only what is there now, without following.
    const now = await collect(c.events(submitted.id, { follow: false }));
    assert.deepEqual(
      now.slice(0, 3).map((e) => [e.seq, e.event]),
      [
        [1, "started"],
        [2, "console"],
        [3, "tool_call_started"],
      ],
    );
    assert.ok(!now.some((e) => e.event === "result"), "not ended yet");

    // Following from after event 2, to the result.
    const rest = await collect(c.events(submitted.id, { after: 2 }));
    assert.equal(rest[0]?.seq, 3);
    assert.equal(rest[0]?.event, "tool_call_started");
    rest.forEach((e, i) => assert.equal(e.seq, 3 + i, "numbered without gaps"));
    const kinds = rest.map((e) => e.event);
    assert.deepEqual(kinds, [
      "tool_call_started",
      "tool_progress",
      "tool_progress",
      "tool_call_finished",
      "console",
      "result",
    ]);
    const result = rest.at(-1) as NumberedEvent;
    assert.ok(result.event === "result");
    assert.equal(result.status, "ok");
    assert.equal(result.stdout, "first\nsecond\n");
    assert.deepEqual((result.result as { answer: number }).answer, 42);

    // Ended: status is the whole response; the events are kept; wait() returns at once.
    const ended = await c.status(submitted.id);
    assert.equal(ended.status, "ok");
    assert.deepEqual(ended.result, result.result);
    assert.equal(ended.tool_calls?.[0]?.outcome, "ok");
    const afterResult = await collect(c.events(submitted.id, { after: result.seq }));
    assert.deepEqual(afterResult, []);
    const last = await collect(c.events(submitted.id, { after: result.seq - 1 }));
    assert.deepEqual(
      last.map((e) => e.event),
      ["result"],
    );
    const waited = await c.wait(submitted.id);
    assert.equal(waited.id, submitted.id);
    assert.equal(waited.status, "ok");
    assert.equal("seq" in waited, false);
  });

  it("cancels a running detached execution, which then ends as cancelled", async () => {
    const c = client();
    const { id } = await c.submit({
      code: 'console.log("working");\nawait tools.everything.trigger_long_running_operation({ duration: 8, steps: 8 });\n"never"',
    });
    await eventually("the tool call to start", async () => {
      const events = await collect(c.events(id, { follow: false }));
      return events.some((e) => e.event === "tool_call_started") ? true : undefined;
    });
    const answer = await c.cancel(id);
    assert.deepEqual(answer, { id, status: "cancelling" });
    const started = Date.now();
    const ended = await c.wait(id);
    assert.ok(Date.now() - started < 5_000, "ended soon after the cancel");
    assert.equal(ended.status, "cancelled");
    assert.equal(ended.error?.kind, "cancelled");
    assert.equal(ended.stdout, "working\n");
    assert.equal(ended.tool_calls[0]?.outcome, "pending");
    // It has ended: nothing to cancel any more.
    const again = await apiError(c.cancel(id), 404, "not_found");
    assert.match(again.message, new RegExp(id));
  });

  it("runs a detached execution in the session it names", async () => {
    const c = client();
    const first = await c.execute({ code: "await tools.everything.get_sum({ a: 1, b: 1 })", session: "new" });
    assert.equal(first.status, "ok");
    assert.ok(first.session);
    const { id } = await c.submit({ code: "await tools.everything.get_sum({ a: 1, b: 1 })", session: first.session });
    const ended = await c.wait(id);
    assert.equal(ended.status, "ok");
    assert.equal(ended.session, first.session);
    assert.equal(ended.replayed_calls, 1);
    assert.equal(ended.tool_calls[0]?.replayed, true);
    await c.deleteSession(first.session);
  });

  it("lists the caller's executions by status", async () => {
    const c = client();
    const { id } = await c.submit({ code: "1 + 1" });
    await c.wait(id);
    const ok = await c.executions({ status: "ok" });
    assert.ok(ok.some((e) => e.id === id), "the detached execution is listed");
    assert.ok(ok.every((e) => e.status === "ok"));
    await apiError(c.executions({ status: "bogus" as "ok" }), 400, "bad_request");
  });
});
