// HTTP/1.1 over the daemon's Unix socket with `node:http`: one connection per request
// (connecting to a local socket is cheap, and a streamed execution is cancelled by closing
// its connection, which must then not be shared).

import { request as httpRequest } from "node:http";
import type { IncomingMessage } from "node:http";
import { AirlockApiError, AirlockConnectionError, AirlockProtocolError } from "./errors.ts";
import type { ApiErrorCode } from "./types.ts";

export interface SendOptions {
  method: "GET" | "POST" | "DELETE";
  path: string;
  /** Sent as `application/json`. */
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
}

/** Sends a request and resolves with the response once its head has arrived. */
export function send(socketPath: string, options: SendOptions): Promise<IncomingMessage> {
  const headers: Record<string, string> = { host: "airlock", ...options.headers };
  let payload: string | undefined;
  if (options.body !== undefined) {
    payload = JSON.stringify(options.body);
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
        agent: false,
        ...(options.signal ? { signal: options.signal } : {}),
      },
      resolve,
    );
    req.on("socket", (socket) => {
      socket.once("connect", () => {
        connected = true;
      });
    });
    req.on("error", (e: unknown) => {
      const aborted = options.signal?.aborted === true;
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

function header(res: IncomingMessage, name: string): string | undefined {
  const value = res.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
