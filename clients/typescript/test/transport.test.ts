// The client's own behaviour, against a fake daemon on a Unix socket (no airlockd needed):
// NDJSON split anywhere, error bodies, hanging up, socket discovery, the retry loop's requests.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  AirlockApiError,
  AirlockClient,
  AirlockConnectionError,
  AirlockProtocolError,
  defaultSocketPath,
  runWithRetries,
  SYSTEM_SOCKET,
} from "../src/index.ts";
import type { ExecutionRequest, ExecutionResponse } from "../src/index.ts";
import { collect, eventually, sleep } from "./helpers.ts";

interface Seen {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

const RESPONSE: ExecutionResponse = {
  id: "ex_1",
  status: "ok",
  result: "é",
  stdout: "",
  stderr: "",
  tool_calls: [],
  replayed_calls: 0,
  stats: { queue_ms: 0, spawn_ms: 0, run_ms: 1, total_ms: 1, worker_from_pool: true },
  peer: { uid: 0, gid: 0, pid: 1 },
  principal: "local",
};

async function body(req: IncomingMessage): Promise<string> {
  req.setEncoding("utf8");
  let text = "";
  for await (const chunk of req) {
    text += chunk;
  }
  return text;
}

/** A fake daemon: an HTTP server on a Unix socket in a directory of its own. */
interface FakeDaemon {
  readonly socketPath: string;
  readonly server: Server;
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

async function fakeDaemon(handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>): Promise<FakeDaemon> {
  const dir = mkdtempSync(join(tmpdir(), "airlock-ts-test-"));
  const socketPath = join(dir, "fake.sock");
  let connections = 0;
  const server = createServer((req, res) => {
    void handle(req, res);
  });
  server.on("connection", () => {
    connections += 1;
  });
  await new Promise<void>((resolve) => {
    server.listen(socketPath, resolve);
  });
  return {
    socketPath,
    server,
    connections: () => connections,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
      });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe("transport (fake daemon)", () => {
  let fake: FakeDaemon | undefined;
  let socketPath = "";
  const seen: Seen[] = [];
  const hungUp: string[] = [];

  const routes: Record<string, (req: IncomingMessage, res: ServerResponse) => Promise<void>> = {
    "/v1/executions": async (_req, res) => {
      // One event split inside a line and inside a two-byte character, a blank line, and the
      // result without its final newline.
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      const bytes = new TextEncoder().encode(
        '{"event":"started","id":"ex_1"}\n{"event":"console","stream":"stdout","level":"log","text":"caf\u00e9"}\n\n' +
          JSON.stringify({ event: "result", ...RESPONSE }),
      );
      const cut1 = 10;
      const cut2 = bytes.indexOf(0xc3) + 1; // between the two bytes of "é"
      for (const part of [bytes.slice(0, cut1), bytes.slice(cut1, cut2), bytes.slice(cut2)]) {
        res.write(part);
        await sleep(20);
      }
      res.end();
    },
    "/v1/executions/cut/events?after=0": async (_req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end('{"event":"started","id":"cut","seq":1}\n');
    },
    "/v1/executions/slow/events?after=0": async (req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write('{"event":"started","id":"slow","seq":1}\n');
      res.on("close", () => hungUp.push(req.url ?? ""));
      // Never ends by itself.
    },
    "/v1/health": async (_req, res) => {
      res.writeHead(502, { "content-type": "text/plain" });
      res.end("bad gateway");
    },
    "/v1/sessions": async (_req, res) => {
      res.writeHead(429, { "content-type": "application/json", "retry-after": "7" });
      res.end(JSON.stringify({ error: { code: "rate_limited", message: "slow down", hint: "wait 7 s" } }));
    },
    "/v1/tools": async (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{not json");
    },
    "/v1/sdk": async (req, res) => {
      res.on("close", () => hungUp.push(req.url ?? ""));
      // Answers only after the client gave up.
    },
  };

  before(async () => {
    fake = await fakeDaemon(async (req, res) => {
      const text = await body(req);
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: text });
      const route = routes[req.url ?? ""];
      if (route) {
        await route(req, res);
      } else {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { code: "not_found", message: `no route for ${req.url}` } }));
      }
    });
    socketPath = fake.socketPath;
  });

  after(async () => {
    await fake?.close();
  });

  it("streams NDJSON split anywhere, sending the request as JSON with Accept: application/x-ndjson", async () => {
    const c = new AirlockClient({ socketPath });
    const events = await collect(c.stream({ code: "1", session: "new" }));
    assert.deepEqual(
      events.map((e) => e.event),
      ["started", "console", "result"],
    );
    const consoleEvent = events[1];
    assert.ok(consoleEvent?.event === "console");
    assert.equal(consoleEvent.text, "café");
    const result = events[2];
    assert.ok(result?.event === "result");
    assert.equal(result.result, "é");
    const request = seen.find((s) => s.url === "/v1/executions");
    assert.ok(request);
    assert.equal(request.method, "POST");
    assert.equal(request.headers["host"], "airlock");
    assert.equal(request.headers["accept"], "application/x-ndjson");
    assert.equal(request.headers["content-type"], "application/json");
    assert.deepEqual(JSON.parse(request.body), { code: "1", session: "new" });
  });

  it("fails a stream that ends without its result event", async () => {
    const c = new AirlockClient({ socketPath });
    const seenEvents: string[] = [];
    // events() may end without a result (follow=false); wait() may not.
    for await (const e of c.events("cut")) {
      seenEvents.push(e.event);
    }
    assert.deepEqual(seenEvents, ["started"]);
    await assert.rejects(c.wait("cut"), AirlockProtocolError);
  });

  it("hangs up when the loop is left early", async () => {
    const c = new AirlockClient({ socketPath });
    for await (const e of c.events("slow")) {
      assert.equal(e.event, "started");
      break;
    }
    await eventually("the server to see the hang-up", async () =>
      hungUp.includes("/v1/executions/slow/events?after=0") ? true : undefined,
    );
  });

  it("hangs up when the signal aborts", async () => {
    const c = new AirlockClient({ socketPath });
    const controller = new AbortController();
    const pending = c.sdk({ signal: controller.signal });
    await eventually("the request to arrive", async () => (seen.some((s) => s.url === "/v1/sdk") ? true : undefined));
    controller.abort();
    await assert.rejects(pending, (e: unknown) => e instanceof Error && e.name === "AbortError");
    await eventually("the server to see the hang-up", async () => (hungUp.includes("/v1/sdk") ? true : undefined));
  });

  it("reads error bodies: the API's shape with code, hint and Retry-After, or plain text", async () => {
    const c = new AirlockClient({ socketPath });
    await assert.rejects(c.sessions(), (e: unknown) => {
      assert.ok(e instanceof AirlockApiError);
      assert.equal(e.status, 429);
      assert.equal(e.code, "rate_limited");
      assert.equal(e.message, "slow down");
      assert.equal(e.hint, "wait 7 s");
      assert.equal(e.retryAfter, 7);
      assert.equal(e.toString(), "AirlockApiError 429 rate_limited: slow down (hint: wait 7 s)");
      return true;
    });
    await assert.rejects(c.health(), (e: unknown) => {
      assert.ok(e instanceof AirlockApiError);
      assert.equal(e.status, 502);
      assert.equal(e.code, "unknown");
      assert.equal(e.message, "bad gateway");
      assert.equal(e.hint, undefined);
      return true;
    });
    await assert.rejects(c.tools(), AirlockProtocolError);
  });

  it("encodes ids and queries", async () => {
    const c = new AirlockClient({ socketPath });
    await assert.rejects(c.status("a/b c"), AirlockApiError);
    await assert.rejects(c.searchTools("create issue", 5), AirlockApiError);
    await assert.rejects(c.events("x", { after: 4, follow: false }).next(), AirlockApiError);
    const urls = seen.map((s) => s.url);
    assert.ok(urls.includes("/v1/executions/a%2Fb%20c"), urls.join(" "));
    assert.ok(urls.includes("/v1/tools/search?q=create+issue&limit=5"), urls.join(" "));
    assert.ok(urls.includes("/v1/executions/x/events?after=4&follow=false"), urls.join(" "));
  });

  it("sends wait: false for submit() and refuses it for execute()", async () => {
    const c = new AirlockClient({ socketPath });
    await assert.rejects(c.execute({ code: "1", wait: false }), TypeError);
    await assert.rejects(c.submit({ code: "x" }), AirlockProtocolError); // the fake answers NDJSON
    const last = seen.at(-1);
    assert.deepEqual(JSON.parse(last?.body ?? "{}"), { code: "x", wait: false });
  });

  it("names the socket and what to do when it cannot connect", async () => {
    const absent = join(dirname(socketPath), "absent.sock");
    const c = new AirlockClient({ socketPath: absent });
    await assert.rejects(c.health(), (e: unknown) => {
      assert.ok(e instanceof AirlockConnectionError);
      assert.equal(e.code, "ENOENT");
      assert.equal(e.socketPath, absent);
      assert.match(e.message, /absent\.sock/);
      assert.match(e.hint ?? "", /airlockd running/);
      return true;
    });
  });
});

describe("kept connections (fake daemon)", () => {
  let fake: FakeDaemon | undefined;
  let socketPath = "";
  const requests: string[] = [];
  const connections = () => fake?.connections() ?? 0;

  before(async () => {
    fake = await fakeDaemon(async (req, res) => {
      await body(req);
      requests.push(`${req.method} ${req.url}`);
      if (req.url === "/v1/executions/cut/resume") {
        // A head and half a body, then the connection dies: the answer is cut short.
        res.writeHead(200, { "content-type": "application/json", "content-length": "100" });
        res.write('{"id":"cut",');
        setTimeout(() => res.socket?.destroy(), 10);
        return;
      }
      if (req.url === "/v1/executions/dropped/resume") {
        // The connection dies with the request read and nothing answered.
        res.socket?.destroy();
        return;
      }
      if (req.url?.startsWith("/v1/executions/stream/events") === true) {
        res.writeHead(200, { "content-type": "application/x-ndjson" });
        res.end('{"event":"started","id":"stream","seq":1}\n');
        return;
      }
      await sleep(req.url === "/v1/sessions/slow" ? 20 : 0);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: "kept", url: req.url }));
    });
    socketPath = fake.socketPath;
  });

  after(async () => {
    await fake?.close();
  });

  it("sends requests with a whole answer over one kept connection", async () => {
    const c = new AirlockClient({ socketPath });
    const before = connections();
    for (let i = 0; i < 5; i++) {
      const answer = (await c.session("a")) as unknown as { url: string };
      assert.equal(answer.url, "/v1/sessions/a");
    }
    await c.resume("r");
    assert.equal(connections() - before, 1);
    c.close();
  });

  it("keeps at most 8 of the connections concurrent requests opened, and reuses them", async () => {
    const c = new AirlockClient({ socketPath });
    const before = connections();
    await Promise.all(Array.from({ length: 12 }, () => c.session("slow")));
    assert.equal(connections() - before, 12);
    await Promise.all(Array.from({ length: 8 }, () => c.session("slow")));
    assert.equal(connections() - before, 12, "the second round used kept connections");
    await Promise.all(Array.from({ length: 12 }, () => c.session("slow")));
    assert.equal(connections() - before, 16, "4 more than the 8 kept");
    c.close();
  });

  it("gives a stream a connection of its own, closed at its end", async () => {
    const c = new AirlockClient({ socketPath });
    await c.session("a");
    const before = connections();
    const events = await collect(c.events("stream", { follow: false }));
    assert.equal(events.length, 1);
    assert.equal(connections() - before, 1);
    await c.session("a");
    assert.equal(connections() - before, 1, "the kept connection, not the stream's");
    c.close();
  });

  it("sends a request once more only when its kept connection was closed before it was written", async () => {
    const c = new AirlockClient({ socketPath });
    await c.session("a");
    await c.session("b");
    const s = fake?.server;
    assert.ok(s);
    // The daemon closes its idle connections (a restart, a shutdown) and, before this client's
    // event loop has read the hang-up, a request goes out on the kept connection: EPIPE, the
    // daemon never saw it, and it goes again on a new one.
    s.closeIdleConnections();
    const seen = requests.length;
    const answer = (await c.resume("after-close")) as unknown as { url: string };
    assert.equal(answer.url, "/v1/executions/after-close/resume");
    assert.deepEqual(requests.slice(seen), ["POST /v1/executions/after-close/resume"]);
    c.close();
  });

  it("reports a kept connection dropped before the answer as such, not as a daemon it cannot reach, and does not send again", async () => {
    const c = new AirlockClient({ socketPath });
    await c.session("a");
    const seen = requests.length;
    await assert.rejects(c.resume("dropped"), (e: unknown) => {
      assert.ok(e instanceof Error);
      assert.ok(!(e instanceof AirlockConnectionError), `${e.name}: ${e.message}`);
      return true;
    });
    assert.deepEqual(requests.slice(seen), ["POST /v1/executions/dropped/resume"]);
    c.close();
  });

  it("does not send again a request whose answer was cut short", async () => {
    const c = new AirlockClient({ socketPath });
    await c.session("a");
    const seen = requests.length;
    await assert.rejects(c.resume("cut"), (e: unknown) => e instanceof Error && !(e instanceof AirlockApiError));
    assert.deepEqual(requests.slice(seen), ["POST /v1/executions/cut/resume"]);
    // The next request works, on a new connection.
    const answer = (await c.session("a")) as unknown as { url: string };
    assert.equal(answer.url, "/v1/sessions/a");
    c.close();
  });
});

describe("defaultSocketPath", () => {
  const none = () => false;
  it("prefers AIRLOCK_SOCKET", () => {
    assert.equal(defaultSocketPath({ AIRLOCK_SOCKET: "/x.sock", XDG_RUNTIME_DIR: "/run/user/1" }, 1000, () => true), "/x.sock");
  });
  it("uses the user's socket when it exists, else the system's, else names the user's", () => {
    const env = { XDG_RUNTIME_DIR: "/run/user/1000" };
    const user = "/run/user/1000/airlock/airlock.sock";
    assert.equal(defaultSocketPath(env, 1000, (p) => p === user), user);
    assert.equal(defaultSocketPath(env, 1000, (p) => p === SYSTEM_SOCKET), SYSTEM_SOCKET);
    assert.equal(defaultSocketPath(env, 1000, none), user);
  });
  it("uses the system socket for root and without XDG_RUNTIME_DIR", () => {
    assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: "/run/user/0" }, 0, none), SYSTEM_SOCKET);
    assert.equal(defaultSocketPath({}, 1000, none), SYSTEM_SOCKET);
  });
});

describe("runWithRetries (fake executor)", () => {
  function fake(statuses: ExecutionResponse["status"][]) {
    const requests: ExecutionRequest[] = [];
    return {
      requests,
      async execute(request: ExecutionRequest): Promise<ExecutionResponse> {
        requests.push(request);
        const status = statuses[requests.length - 1] ?? "ok";
        return { ...RESPONSE, id: `ex_${requests.length}`, status, session: "ses_made" };
      },
    };
  }

  it("makes a session on the first attempt and reuses it, passing the other fields on", async () => {
    const executor = fake(["error", "timeout", "ok"]);
    const outcome = await runWithRetries(executor, "v1", (_r, { attempt }) => `v${attempt + 1}`, {
      timeout_ms: 100,
      language: "javascript",
    });
    assert.equal(outcome.ok, true);
    assert.deepEqual(
      executor.requests.map((r) => [r.code, r.session, r.timeout_ms, r.language]),
      [
        ["v1", "new", 100, "javascript"],
        ["v2", "ses_made", 100, "javascript"],
        ["v3", "ses_made", 100, "javascript"],
      ],
    );
    assert.ok(executor.requests.every((r) => !("maxAttempts" in r) && !("signal" in r)));
  });

  it("stops at maxAttempts and refuses a bad one", async () => {
    const executor = fake(["error", "error", "error", "error"]);
    const outcome = await runWithRetries(executor, "v1", async () => "again", { maxAttempts: 4 });
    assert.equal(outcome.attempts.length, 4);
    assert.equal(outcome.ok, false);
    await assert.rejects(runWithRetries(executor, "v1", () => "x", { maxAttempts: 0 }), RangeError);
  });
});
