// The SDK tree and files, tool search, raw tool definitions, approvals, and their API errors.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AirlockApiError } from "../src/index.ts";
import { apiError, client, skipWithoutDaemon } from "./helpers.ts";

describe("discovery and approvals", { skip: skipWithoutDaemon }, () => {
  it("lists the SDK's files and reads one", async () => {
    const c = client();
    const sdk = await c.sdk();
    const paths = sdk.files.map((f) => f.path);
    for (const p of ["README.md", "tools.d.ts", "servers/everything/index.ts", "servers/everything/get_sum.ts"]) {
      assert.ok(paths.includes(p), `${p} in ${paths.join(", ")}`);
    }
    assert.ok(sdk.tools >= 13, `${sdk.tools} tools`);
    assert.ok(!sdk.unavailable.some((u) => u.namespace === "everything"), JSON.stringify(sdk.unavailable));

    const file = await c.sdkFile("servers/everything/get_sum.ts");
    const listed = sdk.files.find((f) => f.path === "servers/everything/get_sum.ts");
    assert.equal(new TextEncoder().encode(file).length, listed?.bytes, "the listed size is the file's");
    assert.match(file, /export type GetSumInput = \{/);
    assert.match(file, /a: number;/);
    const readme = await c.sdkFile("README.md");
    assert.match(readme, /tools\.everything/);

    const missing = await apiError(c.sdkFile("servers/everything/nope.ts"), 404, "not_found");
    assert.match(missing.message, /nope\.ts/);
    assert.match(missing.hint ?? "", /README\.md/);
  });

  it("searches tools by words, best first, with signature and file", async () => {
    const c = client();
    const answer = await c.searchTools("add two numbers", 3);
    assert.equal(answer.query, "add two numbers");
    assert.ok(answer.results.length >= 1 && answer.results.length <= 3, JSON.stringify(answer));
    const best = answer.results[0];
    assert.ok(best);
    assert.equal(best.tool, "everything.get_sum");
    assert.equal(best.file, "servers/everything/get_sum.ts");
    assert.match(best.signature, /^tools\.everything\.get_sum\(\{ a: number, b: number \}\): Promise</);
    assert.ok(best.score > 0);
    const scores = answer.results.map((r) => r.score);
    assert.deepEqual(scores, [...scores].sort((x, y) => y - x), "ranked");

    const progress = await c.searchTools("long running operation with progress", 1);
    assert.equal(progress.results[0]?.tool, "everything.trigger_long_running_operation");

    const empty = await apiError(c.searchTools("   "), 400, "bad_request");
    assert.match(empty.hint ?? "", /q=/);
  });

  it("lists the raw tool definitions", async () => {
    const { tools } = await client().tools();
    const echo = tools.find((t) => t.namespace === "everything" && t.name === "echo");
    assert.ok(echo, tools.map((t) => `${t.namespace}.${t.name}`).join(", "));
    assert.match(echo.description, /[Ee]cho/);
    const schema = echo.input_schema as { required?: string[]; properties?: Record<string, unknown> };
    assert.deepEqual(schema.required, ["message"]);
    assert.ok(schema.properties && "message" in schema.properties);
    assert.ok(tools.some((t) => t.name === "trigger_long_running_operation"));
  });

  it("lists approvals and refuses a decision with code and hint", async () => {
    const c = client();
    const approvals = await c.approvals();
    assert.ok(Array.isArray(approvals));
    // Not an approver (403) or no such approval (404): either way an API error with a hint.
    let caught: unknown;
    try {
      await c.decide("apr_does_not_exist", "deny", "test");
    } catch (e) {
      caught = e;
    }
    assert.ok(caught instanceof AirlockApiError, String(caught));
    assert.ok(
      (caught.status === 403 && caught.code === "not_permitted") || (caught.status === 404 && caught.code === "not_found"),
      caught.toString(),
    );
    assert.ok(caught.hint);
    const bad = await apiError(c.decide("apr_x", "maybe" as "deny"), 400, "invalid_json");
    assert.match(bad.hint ?? "", /approve/);
  });

  it("refuses to delete a session that does not exist", async () => {
    const c = client();
    const err = await apiError(c.deleteSession("ses_does_not_exist"), 404, "not_found");
    assert.match(err.message, /ses_does_not_exist/);
  });
});
