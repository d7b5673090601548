// Sessions and the retry loop: a program with a real mistake, fixed from the error the daemon
// gave, runs again in the same session with its tool call replayed, not made again.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ExecutionResponse, FixContext } from "../src/index.ts";
import { apiError, client, skipWithoutDaemon } from "./helpers.ts";

// The mistake: get_sum answers a sentence ("The sum of 2 and 3 is 5."), not an object.
const WRONG = [
  "const s = await tools.everything.get_sum({ a: 2, b: 3 });",
  'console.log("got", s);',
  "const n: number = s.result.value;",
  "n * 10",
].join("\n");

describe("sessions and runWithRetries", { skip: skipWithoutDaemon }, () => {
  it("fixes a failed program from its error and reruns it in the same session, replaying the call", async () => {
    const c = client();
    const seen: { response: ExecutionResponse; context: FixContext }[] = [];
    const outcome = await c.runWithRetries(WRONG, (response, context) => {
      seen.push({ response, context });
      const e = response.error;
      // What an agent reads to fix it: where, what the value really was, and the trace.
      if (e?.line !== 3 || !e.explanation?.includes("a string") || !e.excerpt?.includes("> 3 |")) {
        return undefined;
      }
      const got = response.tool_calls[0]?.result;
      if (typeof got !== "string" || !/is \d+/.test(got)) {
        return undefined;
      }
      const lines = context.code.split("\n");
      lines[2] = "const n = Number(/is (\\d+)/.exec(s)![1]);";
      return lines.join("\n");
    });

    assert.equal(seen.length, 1, "fix asked once");
    const first = seen[0];
    assert.ok(first);
    assert.equal(first.context.attempt, 1);
    assert.equal(first.context.code, WRONG);
    assert.equal(first.response.status, "error");
    assert.equal(first.response.error?.kind, "runtime");
    assert.match(first.response.error?.hint ?? "", /servers\/everything\/get_sum\.ts/);
    assert.equal(first.response.tool_calls[0]?.replayed, false);
    assert.match(first.context.session ?? "", /^ses_/);

    assert.equal(outcome.ok, true, JSON.stringify(outcome.response.error));
    assert.equal(outcome.attempts.length, 2);
    assert.equal(outcome.response, outcome.attempts[1]?.response);
    assert.equal(outcome.response.status, "ok");
    assert.equal(outcome.response.result, 50);
    assert.equal(outcome.response.stdout, "got The sum of 2 and 3 is 5.\n");
    const [a1, a2] = outcome.attempts;
    assert.ok(a1 && a2);
    assert.equal(a1.attempt, 1);
    assert.equal(a2.attempt, 2);
    assert.match(a2.code, /Number\(/);
    assert.equal(a1.response.session, outcome.session);
    assert.equal(a2.response.session, outcome.session, "the second attempt ran in the first one's session");
    assert.equal(a2.response.replayed_calls, 1);
    assert.equal(a2.response.tool_calls[0]?.replayed, true);
    assert.equal(a2.response.tool_calls[0]?.tool, "everything.get_sum");

    // The journal sent the call once, for both attempts.
    assert.ok(outcome.session);
    const detail = await c.session(outcome.session);
    assert.equal(detail.session.id, outcome.session);
    assert.equal(detail.calls.length, 1);
    assert.equal(detail.calls[0]?.tool, "everything.get_sum");
    assert.equal(detail.calls[0]?.state, "ok");
    assert.equal(detail.calls[0]?.sends, 1);
    assert.deepEqual(
      detail.executions.map((e) => [e.id, e.status]).sort(),
      [
        [a1.response.id, "error"],
        [a2.response.id, "ok"],
      ].sort(),
    );

    const listed = await c.sessions();
    assert.ok(listed.some((s) => s.id === outcome.session && s.calls === 1));

    assert.deepEqual(await c.deleteSession(outcome.session), { id: outcome.session, deleted: true });
    await apiError(c.session(outcome.session), 404, "not_found");
    assert.ok(!(await c.sessions()).some((s) => s.id === outcome.session));
  });

  it("stops when fix gives up, and after maxAttempts", async () => {
    const c = client();
    const gaveUp = await c.runWithRetries("throw new Error('first')", () => undefined);
    assert.equal(gaveUp.ok, false);
    assert.equal(gaveUp.attempts.length, 1);
    assert.equal(gaveUp.response.error?.message, "first");

    let asked = 0;
    const exhausted = await c.runWithRetries(
      "throw new Error('attempt 1')",
      (_response, { attempt }) => {
        asked++;
        return `throw new Error('attempt ${attempt + 1}')`;
      },
      { maxAttempts: 2, timeout_ms: 5_000 },
    );
    assert.equal(asked, 1, "no fix asked after the last attempt");
    assert.equal(exhausted.attempts.length, 2);
    assert.equal(exhausted.response.error?.message, "attempt 2");
    assert.deepEqual(
      exhausted.attempts.map((a) => a.response.session),
      [exhausted.session, exhausted.session],
    );
    for (const s of [gaveUp.session, exhausted.session]) {
      assert.ok(s);
      await c.deleteSession(s);
    }
  });

  it("does not call fix when the first attempt succeeds, and keeps a session it is given", async () => {
    const c = client();
    const first = await c.execute({ code: "1", session: "new" });
    assert.ok(first.session);
    const outcome = await c.runWithRetries(
      "2",
      () => assert.fail("fix must not be called"),
      { session: first.session },
    );
    assert.equal(outcome.ok, true);
    assert.equal(outcome.attempts.length, 1);
    assert.equal(outcome.response.result, 2);
    assert.equal(outcome.session, first.session);
    await c.deleteSession(first.session);
  });

  it("ends the loop on a waiting response (its pending calls are the caller's)", async () => {
    const c = client();
    const outcome = await c.runWithRetries(
      "await tools.client.ask({ q: 1 })",
      () => assert.fail("waiting is not a failure"),
      { client_tools: [{ name: "ask" }] },
    );
    assert.equal(outcome.ok, false);
    assert.equal(outcome.response.status, "waiting");
    assert.equal(outcome.response.pending_calls?.[0]?.tool, "ask");
    await c.cancel(outcome.response.id);
  });
});
