// Executions that wait for the client's own tools: client_tools → waiting with pending_calls →
// submitResults → ok; partial answers, errors, cancelling, and executeWithClientTools().

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ClientToolSpec, Json } from "../src/index.ts";
import { apiError, client, skipWithoutDaemon } from "./helpers.ts";

const lookup: ClientToolSpec = {
  name: "lookup",
  description: "Looks a key up in the agent's own store",
  input_schema: {
    type: "object",
    properties: { key: { type: "string" } },
    required: ["key"],
  },
};

describe("client tools", { skip: skipWithoutDaemon }, () => {
  it("waits for the client's results, batch by batch, then finishes with the daemon's tools", async () => {
    const c = client();
    const code = [
      "const [x, y] = await Promise.all([",
      '  tools.client.lookup({ key: "x" }),',
      '  tools.client.lookup({ key: "y" }),',
      "]);",
      "const sum = await tools.everything.get_sum({ a: x.n, b: y.n });",
      'console.log("sum", sum);',
      "({ x: x.n, y: y.n, sum })",
    ].join("\n");
    const first = await c.execute({ code, client_tools: [lookup] });
    assert.equal(first.status, "waiting", JSON.stringify(first.error));
    assert.match(first.session ?? "", /^ses_/, "a waiting execution runs in a session");
    assert.deepEqual(first.pending_calls, [
      { id: 1, tool: "lookup", args: { key: "x" } },
      { id: 2, tool: "lookup", args: { key: "y" } },
    ]);
    assert.deepEqual(
      first.tool_calls.map((t) => [t.tool, t.outcome]),
      [
        ["client.lookup", "pending"],
        ["client.lookup", "pending"],
      ],
    );
    assert.ok(first.determinism, "the clock and seed it ran with");
    assert.match(first.determinism.seed, /^[0-9a-f]{64}$/);

    // status() shows the waiting response.
    const shown = await c.status(first.id);
    assert.equal(shown.status, "waiting");
    assert.deepEqual(shown.pending_calls, first.pending_calls);

    // Answer one: it waits again for the other.
    const second = await c.submitResults(first.id, [{ id: 1, ok: { n: 2 } }]);
    assert.equal(second.id, first.id);
    assert.equal(second.status, "waiting");
    assert.deepEqual(second.pending_calls, [{ id: 2, tool: "lookup", args: { key: "y" } }]);

    // Answer the other: it runs to the end, calling the everything server.
    const done = await c.submitResults(first.id, [{ id: 2, ok: { n: 40 } }]);
    assert.equal(done.status, "ok", JSON.stringify(done.error));
    assert.deepEqual(done.result, { x: 2, y: 40, sum: "The sum of 2 and 40 is 42." });
    assert.equal(done.stdout, "sum The sum of 2 and 40 is 42.\n");
    assert.deepEqual(
      done.tool_calls.map((t) => [t.tool, t.outcome]),
      [
        ["client.lookup", "ok"],
        ["client.lookup", "ok"],
        ["everything.get_sum", "ok"],
      ],
    );
    assert.equal(done.pending_calls, undefined);

    // It is not waiting any more.
    const late = await apiError(c.submitResults(first.id, [{ id: 2, ok: { n: 1 } }]), 409, "conflict");
    assert.match(late.message, /not waiting/);
  });

  it("turns an error result into a ToolError in the program", async () => {
    const c = client();
    const r = await c.execute({
      code: 'try {\n  await tools.client.lookup({ key: "k" });\n  "no error";\n} catch (e) {\n  [e.name, e.code, e.message];\n}',
      client_tools: [lookup],
    });
    assert.equal(r.status, "waiting");
    const id = r.pending_calls?.[0]?.id;
    assert.equal(id, 1);
    const done = await c.submitResults(r.id, [{ id, error: { message: "store is down" } }]);
    assert.equal(done.status, "ok", JSON.stringify(done.error));
    const [name, code, message] = done.result as Json[];
    assert.equal(name, "ToolError");
    assert.equal(code, "upstream_error");
    assert.match(String(message), /store is down/);
  });

  it("refuses results for calls that are not pending", async () => {
    const c = client();
    const r = await c.execute({ code: 'await tools.client.lookup({ key: "k" })', client_tools: [lookup] });
    assert.equal(r.status, "waiting");
    await apiError(c.submitResults(r.id, [{ id: 99, ok: 1 }]), 400, "bad_request");
    await apiError(c.submitResults("ex_does_not_exist", [{ id: 1, ok: 1 }]), 404, "not_found");
    // Cancelling a waiting execution ends it at once.
    assert.deepEqual(await c.cancel(r.id), { id: r.id, status: "cancelled" });
    await apiError(c.submitResults(r.id, [{ id: 1, ok: 1 }]), 409, "conflict");
  });

  it("checks calls against the declared schema before the program runs", async () => {
    const r = await client().execute({ code: "await tools.client.lookup({ id: 3 })", client_tools: [lookup] });
    assert.equal(r.status, "error");
    assert.equal(r.error?.kind, "contract");
    assert.match(r.error?.hint ?? "", /key: string/);
  });

  it("answers pending calls with handlers until the program ends (executeWithClientTools)", async () => {
    const c = client();
    const asked: Json[] = [];
    const r = await c.executeWithClientTools(
      {
        code: [
          "let total = 0;",
          'for (const key of ["a", "bb", "ccc"]) {',
          "  const v = await tools.client.lookup({ key });",
          "  total += v.len;",
          "}",
          "let failed = null;",
          'try { await tools.client.lookup({ key: "boom" }); } catch (e) { failed = e.message; }',
          "({ total, failed })",
        ].join("\n"),
        client_tools: [lookup],
      },
      {
        lookup: async (args) => {
          asked.push(args);
          const key = (args as { key: string }).key;
          if (key === "boom") {
            throw new Error("no such key: boom");
          }
          return { len: key.length };
        },
      },
    );
    assert.equal(r.status, "ok", JSON.stringify(r.error));
    assert.equal((r.result as { total: number }).total, 6);
    assert.match(String((r.result as { failed: string }).failed), /no such key: boom/);
    assert.deepEqual(asked, [{ key: "a" }, { key: "bb" }, { key: "ccc" }, { key: "boom" }]);
  });

  it("describes client tools in the SDK", async () => {
    const sdk = await client().clientSdk([lookup]);
    const paths = Object.keys(sdk.files);
    assert.ok(paths.includes("tools.d.ts"), paths.join(", "));
    const file = Object.entries(sdk.files).find(([p]) => p.startsWith("servers/client/lookup"));
    assert.ok(file, paths.join(", "));
    assert.match(file[1], /key: string/);
    assert.match(sdk.files["servers/client/index.ts"] ?? "", /Looks a key up/);
  });
});
