// @airlock/client: a typed client of airlockd's agent API over its Unix socket, with no
// runtime dependencies (node:http only).

export { AirlockClient, withoutEventFields } from "./client.ts";
export type {
  AirlockClientOptions,
  CallOptions,
  ClientToolHandler,
  ClientToolsOptions,
  EventsOptions,
} from "./client.ts";
export { AirlockApiError, AirlockConnectionError, AirlockProtocolError } from "./errors.ts";
export { runWithRetries } from "./retry.ts";
export type { Attempt, Executor, FixContext, FixFn, RetryOptions, RetryOutcome } from "./retry.ts";
export { defaultSocketPath, SYSTEM_SOCKET } from "./socket.ts";
export type * from "./types.ts";
