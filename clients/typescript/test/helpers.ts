// Shared by the tests that talk to a real daemon (AIRLOCK_SOCKET).

import assert from "node:assert/strict";
import { AirlockApiError, AirlockClient } from "../src/index.ts";
import type { ApiErrorCode } from "../src/index.ts";

/** The daemon's socket, from the environment; the daemon tests skip without it. */
export const socketPath: string | undefined = process.env["AIRLOCK_SOCKET"] || undefined;

/** `skip` for the daemon tests: false, or why they do not run and how to run them. */
export const skipWithoutDaemon: string | false = socketPath
  ? false
  : "AIRLOCK_SOCKET is not set: start airlockd (e.g. `airlockd --socket /tmp/airlock.sock`, with the " +
    "`everything` MCP server in its policy) and run `AIRLOCK_SOCKET=/tmp/airlock.sock " +
    "clients/typescript/run-tests.sh`";

export function client(): AirlockClient {
  assert.ok(socketPath, "AIRLOCK_SOCKET");
  return new AirlockClient({ socketPath });
}

/** Every item of an async iterable. */
export async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) {
    out.push(item);
  }
  return out;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => {
    setTimeout(resolve, ms);
  });
}

/** Polls `probe` until it returns something other than `undefined`, or fails after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) {
      return value;
    }
    if (Date.now() > deadline) {
      assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await sleep(50);
  }
}

/** Awaits `promise`, which must reject with an `AirlockApiError` of this status and code with a hint; returns it. */
export async function apiError(
  promise: Promise<unknown>,
  status: number,
  code: ApiErrorCode,
): Promise<AirlockApiError> {
  let caught: unknown;
  try {
    await promise;
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof AirlockApiError, `expected an AirlockApiError, got ${String(caught)}`);
  assert.equal(caught.status, status, caught.toString());
  assert.equal(caught.code, code, caught.toString());
  assert.ok(caught.message.length > 0, "the error has a message");
  assert.ok(caught.hint !== undefined && caught.hint.length > 0, `${code} has a hint: ${caught.toString()}`);
  return caught;
}

/** The value of one Prometheus sample (`name{labels}`), 0 when absent. */
export function metric(text: string, sample: string): number {
  for (const line of text.split("\n")) {
    if (line.startsWith(`${sample} `)) {
      return Number(line.slice(sample.length + 1));
    }
  }
  return 0;
}
