// HTTP/1.1 over the daemon's Unix socket with `node:http`. A request whose whole answer is read
// (`execute`, `health`, ...) goes over a kept connection (`Connections`): opening one costs
// Node about 0.2 ms, as much as the rest of a trivial execution's round trip. A stream gets a
// connection of its own, because leaving it early closes that connection, which cancels the
// execution.

import { Agent, request as httpRequest } from "node:http";
import type { IncomingMessage } from "node:http";
import { AirlockApiError, AirlockConnectionError, AirlockProtocolError } from "./errors.ts";
import type { ApiErrorCode } from "./types.ts";

export interface SendOptions {
  method: "GET" | "POST" | "DELETE";
  path: string;
  /** Sent as `application/json` (every `POST` says that type, with a body or without). */
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
}

/**
 * The connections a client keeps between requests: at most 8 idle, the most recent reused
 * first. An idle connection holds no event loop open (Node unrefs it).
 *
 * A request is sent again only when it cannot have reached the daemon: its write on a kept
 * connection failed with `EPIPE`, which a Unix socket returns only when the other end was
 * already closed (the daemon restarted, or closed its idle connections on shutdown, while this
 * client was idle and had not read the hang-up yet). Any other failure is the caller's: a
 * `POST /v1/executions` cut short may have run, and must not run twice.
 */
export class Connections {
  readonly #agent = new Agent({ keepAlive: true, maxFreeSockets: 8, scheduling: "lifo" });

  /** Closes the idle connections; later requests open new ones. */
  close(): void {
    this.#agent.destroy();
  }

  /** Sends a request over a kept connection, or a new one kept afterwards. */
  async send(socketPath: string, options: SendOptions): Promise<IncomingMessage> {
    // Each stale connection found is dropped; after the 8 that can be kept, the agent opens a
    // new one, whose failure is final.
    for (let stale = 0; ; stale++) {
      try {
        return await send(socketPath, options, this.#agent);
      } catch (e) {
        if (!(e instanceof StaleConnection) || stale >= 8) {
          throw e instanceof StaleConnection ? e.cause : e;
        }
      }
    }
  }
}

/** A kept connection the daemon had closed before the request was written (see `Connections`). */
class StaleConnection extends Error {
  constructor(cause: unknown) {
    super("a kept connection was closed by the daemon", { cause });
  }
}

/**
 * Sends a request and resolves with the response once its head has arrived: on a connection
 * of its own, or through `agent`.
 */
export function send(socketPath: string, options: SendOptions, agent?: Agent): Promise<IncomingMessage> {
  const headers: Record<string, string> = { host: "airlock", ...options.headers };
  let payload: string | undefined;
  if (options.body !== undefined) {
    payload = JSON.stringify(options.body);
  }
  // The daemon answers a POST without this type 415, also one without a body (`resume`).
  if (payload !== undefined || options.method === "POST") {
    headers["content-type"] = "application/json";
  }
  return new Promise((resolve, reject) => {
    let connected = false;
    const req = httpRequest(
      {
        socketPath,
        path: options.path,
        method: options.method,
        headers,
        agent: agent ?? false,
        ...(options.signal ? { signal: options.signal } : {}),
      },
      resolve,
    );
    req.on("socket", (socket) => {
      // A kept connection is connected already; its failure is not "cannot connect".
      if (!socket.connecting) {
        connected = true;
        return;
      }
      socket.once("connect", () => {
        connected = true;
      });
    });
    req.on("error", (e: unknown) => {
      const aborted = options.signal?.aborted === true;
      if (!aborted && req.reusedSocket && errorCode(e) === "EPIPE") {
        reject(new StaleConnection(e));
        return;
      }
      reject(connected || aborted ? e : new AirlockConnectionError(socketPath, e));
    });
    req.end(payload);
  });
}

/** The whole body as text. */
export async function readText(res: IncomingMessage): Promise<string> {
  res.setEncoding("utf8");
  let text = "";
  for await (const chunk of res) {
    text += chunk;
  }
  return text;
}

/** Whether the status is a success (2xx). */
export function isSuccess(res: IncomingMessage): boolean {
  const status = res.statusCode ?? 0;
  return status >= 200 && status < 300;
}

/** The error a non-2xx answer stands for (its body read here). */
export async function apiError(res: IncomingMessage): Promise<AirlockApiError> {
  const status = res.statusCode ?? 0;
  const text = await readText(res);
  const retry = header(res, "retry-after");
  const retryAfter = retry !== undefined && /^\d+$/.test(retry) ? Number(retry) : undefined;
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    return new AirlockApiError(status, "unknown", text || `HTTP ${status}`, undefined, retryAfter, text);
  }
  const error = isObject(body) ? body["error"] : undefined;
  if (isObject(error) && typeof error["code"] === "string" && typeof error["message"] === "string") {
    const hint = typeof error["hint"] === "string" ? error["hint"] : undefined;
    return new AirlockApiError(
      status,
      error["code"] as ApiErrorCode,
      error["message"],
      hint,
      retryAfter,
      body,
    );
  }
  return new AirlockApiError(status, "unknown", text || `HTTP ${status}`, undefined, retryAfter, body);
}

/** Parses a JSON body, or throws `AirlockProtocolError` naming what was expected. */
export function parseJson<T>(text: string, what: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (e) {
    throw new AirlockProtocolError(`the daemon's answer to ${what} is not JSON: ${text.slice(0, 200)}`, {
      cause: e,
    });
  }
}

/**
 * The lines of an NDJSON body as they arrive, each parsed; blank lines are skipped. Breaking
 * out of the loop closes the connection.
 */
export async function* ndjson(res: IncomingMessage, what: string): AsyncGenerator<unknown, void, undefined> {
  res.setEncoding("utf8");
  let pending = "";
  try {
    for await (const chunk of res) {
      pending += chunk;
      let nl = pending.indexOf("\n");
      while (nl >= 0) {
        const line = pending.slice(0, nl).trim();
        pending = pending.slice(nl + 1);
        if (line) {
          yield parseJson<unknown>(line, what);
        }
        nl = pending.indexOf("\n");
      }
    }
    const last = pending.trim();
    if (last) {
      yield parseJson<unknown>(last, what);
    }
  } finally {
    // Early exit (break, throw, return): hang up, which cancels a streamed execution.
    res.destroy();
  }
}

function errorCode(e: unknown): string | undefined {
  return typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined;
}

function header(res: IncomingMessage, name: string): string | undefined {
  const value = res.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
