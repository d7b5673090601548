// execute(): results, console output, failures with where and what to change, tool calls
// through the `everything` MCP server, and the API's own errors.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { apiError, client, skipWithoutDaemon } from "./helpers.ts";

describe("execute", { skip: skipWithoutDaemon }, () => {
  it("runs TypeScript and returns its value", async () => {
    const r = await client().execute({ code: "const xs: number[] = [1, 2, 3];\nxs.map((x: number) => x * 2)" });
    assert.equal(r.status, "ok");
    assert.deepEqual(r.result, [2, 4, 6]);
    assert.equal(r.error, undefined);
    assert.match(r.id, /^ex_/);
    assert.deepEqual(r.tool_calls, []);
    assert.equal(r.principal.length > 0, true);
    assert.ok(r.stats.total_ms >= r.stats.run_ms, "total includes the run");
    assert.equal(r.session, undefined, "no session unless asked for");
  });

  it("runs JavaScript when asked, and a top-level return is the value", async () => {
    const r = await client().execute({ code: "const o = { a: 1 };\nreturn { ...o, b: [o.a + 1] };", language: "javascript" });
    assert.equal(r.status, "ok");
    assert.deepEqual(r.result, { a: 1, b: [2] });
  });

  it("returns console output, one line per call, stdout and stderr apart", async () => {
    const r = await client().execute({
      code: 'console.log("one", 1);\nconsole.info({ k: "v" });\nconsole.warn("careful");\nconsole.error("bad");\n"done"',
    });
    assert.equal(r.status, "ok");
    assert.equal(r.result, "done");
    const out = r.stdout.split("\n").filter((l) => l !== "");
    assert.equal(out.length, 2, r.stdout);
    assert.match(out[0] ?? "", /one.*1/);
    assert.match(out[1] ?? "", /k.*v/);
    assert.equal(r.stderr, "careful\nbad\n");
  });

  it("reports a runtime error with its line, column, excerpt and name", async () => {
    const code = "const a = 1;\nconst b: any = null;\nconst c = b.field;\nc";
    const r = await client().execute({ code });
    assert.equal(r.status, "error");
    assert.equal(r.result, null);
    const e = r.error;
    assert.ok(e, "an error");
    assert.equal(e.kind, "runtime");
    assert.equal(e.name, "TypeError");
    assert.match(e.message, /field/);
    assert.equal(e.line, 3);
    assert.equal(e.column, 11);
    assert.ok(e.excerpt, "an excerpt");
    assert.match(e.excerpt, /> 3 \| const c = b\.field;/);
    assert.match(e.excerpt, /\^/);
  });

  it("reports a syntax error before anything runs", async () => {
    const r = await client().execute({ code: 'console.log("never");\nconst x = ;' });
    assert.equal(r.status, "error");
    assert.equal(r.error?.kind, "syntax");
    assert.equal(r.error?.line, 2);
    assert.equal(r.stdout, "", "nothing ran");
  });

  it("refuses a call that breaks the tool's contract, with the expected signature as hint", async () => {
    const r = await client().execute({ code: 'const r = await tools.everything.echo({ msg: "hi" });\nr' });
    assert.equal(r.status, "error");
    const e = r.error;
    assert.ok(e);
    assert.equal(e.kind, "contract");
    assert.match(e.message, /message/, "names the missing argument");
    assert.equal(e.line, 1);
    assert.ok(e.hint, "a hint");
    assert.match(e.hint, /tools\.everything\.echo\(\{ message: string \}\)/);
    assert.deepEqual(r.tool_calls, [], "nothing ran");
  });

  it("calls a tool of the everything server and records the call", async () => {
    const r = await client().execute({
      code: "const [e, s] = await Promise.all([\n  tools.everything.echo({ message: 'héllo' }),\n  tools.everything.get_sum({ a: 2, b: 40 }),\n]);\n({ e, s })",
    });
    assert.equal(r.status, "ok", JSON.stringify(r.error));
    assert.deepEqual(r.result, { e: "Echo: héllo", s: "The sum of 2 and 40 is 42." });
    assert.equal(r.tool_calls.length, 2);
    const byTool = new Map(r.tool_calls.map((c) => [c.tool, c]));
    const echo = byTool.get("everything.echo");
    const sum = byTool.get("everything.get_sum");
    assert.ok(echo && sum, JSON.stringify(r.tool_calls));
    assert.deepEqual(echo.args, { message: "héllo" });
    assert.deepEqual(sum.args, { a: 2, b: 40 });
    assert.equal(sum.outcome, "ok");
    assert.equal(sum.replayed, false);
    assert.ok(sum.duration_ms > 0);
    assert.equal(sum.result, undefined, "a program that succeeded keeps tool results out of the answer");
  });

  it("passes an uncaught ToolError's hint on: an unknown tool names the one meant", async () => {
    const r = await client().execute({ code: "const r = await tools.everything.add({ a: 1, b: 2 });\nr" });
    assert.equal(r.status, "error");
    assert.ok(r.error?.hint, JSON.stringify(r.error));
    assert.match(r.error.hint, /get_sum/);
    assert.equal(r.error.line, 1);
  });

  it("explains a TypeError on a tool's value, and shows the result the program got", async () => {
    const r = await client().execute({
      code: "const s = await tools.everything.get_sum({ a: 2, b: 3 });\nconst n: number = s.result.value;\nn",
    });
    assert.equal(r.status, "error");
    const e = r.error;
    assert.ok(e);
    assert.equal(e.line, 2);
    assert.ok(e.explanation, JSON.stringify(e));
    assert.match(e.explanation, /s\.result is undefined/);
    assert.match(e.explanation, /tools\.everything\.get_sum/);
    assert.match(e.hint ?? "", /servers\/everything\/get_sum\.ts/);
    assert.equal(r.tool_calls[0]?.result, "The sum of 2 and 3 is 5.", "a failed program's trace carries results");
  });

  it("ends a program past its timeout with status timeout", async () => {
    const r = await client().execute({ code: "while (true) {}", timeout_ms: 300 });
    assert.equal(r.status, "timeout");
    assert.equal(r.error?.kind, "timeout");
  });

  it("throws AirlockApiError with code and hint for a request the API refuses", async () => {
    const c = client();
    const unknownField = await apiError(
      c.execute({ code: "1", colour: "red" } as unknown as { code: string }),
      400,
      "invalid_json",
    );
    assert.match(unknownField.message, /colour/);
    const timeout = await apiError(c.execute({ code: "1", timeout_ms: 0 }), 400, "invalid_timeout");
    assert.match(timeout.message, /timeout_ms/);
    const session = await apiError(c.execute({ code: "1", session: "ses_does_not_exist" }), 404, "not_found");
    assert.match(session.message, /ses_does_not_exist/);
    await apiError(c.status("ex_does_not_exist"), 404, "not_found");
    await apiError(c.resume("ex_does_not_exist"), 404, "not_found");
  });

  it("reports the daemon's health", async () => {
    const h = await client().health();
    assert.equal(h.status, "ok");
    assert.equal(typeof h.version, "string");
    assert.equal(h.journal?.status, "ok", "the tests need sessions");
  });
});
