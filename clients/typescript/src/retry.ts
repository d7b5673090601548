// The loop an agent runs (docs/agent-api.md, "Sessions"): execute in a new session; on a
// failure read the error (message, line, excerpt, hint, explanation) and the trace, edit the
// program, and run it again in the same session, so the calls that already succeeded are
// answered from the journal instead of being made again.

import type { CallOptions } from "./client.ts";
import type { ExecutionRequest, ExecutionResponse } from "./types.ts";

/** One run of the loop. */
export interface Attempt {
  /** 1-based. */
  attempt: number;
  code: string;
  response: ExecutionResponse;
}

/** What `fix` is told besides the failed response. */
export interface FixContext {
  /** The attempt that failed (1-based). */
  attempt: number;
  /** The code that failed. */
  code: string;
  /** The session every attempt runs in. */
  session: string | undefined;
  /** Every attempt so far, the failed one last. */
  attempts: readonly Attempt[];
}

/**
 * Gets a failed response (`status` `error` or `timeout`: read `error.message`, `line`,
 * `excerpt`, `hint`, `explanation`, and `tool_calls`) and returns the program to run next, or
 * `undefined` to give up.
 */
export type FixFn = (
  response: ExecutionResponse,
  context: FixContext,
) => string | undefined | Promise<string | undefined>;

/** `runWithRetries` options: the request's fields besides `code`, and `maxAttempts`. */
export type RetryOptions = Omit<ExecutionRequest, "code" | "wait"> &
  CallOptions & {
    /** Runs at most (default 3), the first included. */
    maxAttempts?: number;
  };

export interface RetryOutcome {
  /** The last response: `ok`, the last failure, or `waiting` (answer its pending calls). */
  response: ExecutionResponse;
  /** Every run, in order. */
  attempts: Attempt[];
  /** The session the attempts ran in (from the first response). */
  session: string | undefined;
  /** `response.status === "ok"`. */
  ok: boolean;
}

/** What `runWithRetries` needs of a client. */
export interface Executor {
  execute(request: ExecutionRequest, options?: CallOptions): Promise<ExecutionResponse>;
}

/**
 * Runs `code`, and while it fails (`error` or `timeout`) asks `fix` for the next program, at
 * most `maxAttempts` runs in all. The first run makes a session (`session: "new"`, unless the
 * options name one) and every later run goes to that session. A `waiting` response ends the
 * loop: it is not a failure, and its pending calls are the caller's to answer.
 */
export async function runWithRetries(
  client: Executor,
  code: string,
  fix: FixFn,
  options: RetryOptions = {},
): Promise<RetryOutcome> {
  const { maxAttempts = 3, signal, ...request } = options;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
    throw new RangeError(`maxAttempts must be a positive integer, not ${maxAttempts}`);
  }
  const call: CallOptions = signal ? { signal } : {};
  const attempts: Attempt[] = [];
  let session: string | undefined = request.session ?? "new";
  let current = code;
  for (;;) {
    const response = await client.execute({ ...request, code: current, session: session ?? "new" }, call);
    attempts.push({ attempt: attempts.length + 1, code: current, response });
    if (session === "new" || session === undefined) {
      session = response.session;
    }
    const failed = response.status === "error" || response.status === "timeout";
    if (!failed || attempts.length >= maxAttempts) {
      return { response, attempts, session, ok: response.status === "ok" };
    }
    const next = await fix(response, { attempt: attempts.length, code: current, session, attempts });
    if (next === undefined) {
      return { response, attempts, session, ok: false };
    }
    current = next;
  }
}
