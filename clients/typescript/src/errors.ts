import type { ApiErrorCode } from "./types.ts";

/**
 * A non-2xx answer of the daemon: `{ "error": { "code", "message", "hint"? } }`. `message` is
 * the daemon's message as sent.
 * `code` is `"unknown"` when the body was not in that shape (then `message` is the body).
 */
export class AirlockApiError extends Error {
  /** The HTTP status (400, 404, 409, 429, ...). */
  readonly status: number;
  readonly code: ApiErrorCode | "unknown";
  /** What to do about it, when the daemon says. */
  readonly hint: string | undefined;
  /** Seconds to wait before trying again (`Retry-After`, sent with `429 rate_limited`). */
  readonly retryAfter: number | undefined;
  /** The parsed body (for `422` reload reports and other non-standard bodies). */
  readonly body: unknown;

  constructor(
    status: number,
    code: ApiErrorCode | "unknown",
    message: string,
    hint?: string,
    retryAfter?: number,
    body?: unknown,
  ) {
    super(message);
    this.name = "AirlockApiError";
    this.status = status;
    this.code = code;
    this.hint = hint;
    this.retryAfter = retryAfter;
    this.body = body;
  }

  /** `message (hint: …)`, for logs. */
  override toString(): string {
    return `${this.name} ${this.status} ${this.code}: ${this.message}${this.hint ? ` (hint: ${this.hint})` : ""}`;
  }
}

/** The daemon could not be reached (no socket, refused, permission denied). */
export class AirlockConnectionError extends Error {
  readonly socketPath: string;
  /** The system error code (`ENOENT`, `ECONNREFUSED`, `EACCES`, ...). */
  readonly code: string | undefined;
  readonly hint: string | undefined;

  constructor(socketPath: string, cause: unknown) {
    const code = errorCode(cause);
    const hint =
      code === "ENOENT" || code === "ECONNREFUSED"
        ? "is airlockd running? start it with `airlockd`, or pass socketPath / set AIRLOCK_SOCKET"
        : code === "EACCES"
          ? "the socket is mode 0660: are you in the daemon's group?"
          : undefined;
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(`cannot connect to airlockd at ${socketPath}: ${reason}${hint ? ` (${hint})` : ""}`, {
      cause,
    });
    this.name = "AirlockConnectionError";
    this.socketPath = socketPath;
    this.code = code;
    this.hint = hint;
  }
}

/** The daemon answered something this client cannot read (bad JSON, a stream cut short). */
export class AirlockProtocolError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "AirlockProtocolError";
  }
}

function errorCode(e: unknown): string | undefined {
  if (typeof e === "object" && e !== null && "code" in e) {
    const code = (e as { code: unknown }).code;
    return typeof code === "string" ? code : undefined;
  }
  return undefined;
}
