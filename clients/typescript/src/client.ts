import { AirlockProtocolError } from "./errors.ts";
import { apiError, Connections, isObject, isSuccess, ndjson, parseJson, readText, send } from "./http.ts";
import type { SendOptions } from "./http.ts";
import { runWithRetries } from "./retry.ts";
import type { FixFn, RetryOptions, RetryOutcome } from "./retry.ts";
import { defaultSocketPath } from "./socket.ts";
import type {
  ApprovalDecided,
  ApprovalDecision,
  CancelAnswer,
  ClientResult,
  ClientSdk,
  ClientToolSpec,
  ExecutionEvent,
  ExecutionRecord,
  ExecutionRecordStatus,
  ExecutionRequest,
  ExecutionResponse,
  ExecutionState,
  Health,
  Json,
  NumberedEvent,
  PendingApproval,
  PendingCall,
  ReloadReport,
  SdkTree,
  SearchAnswer,
  SessionDetail,
  SessionSummary,
  SubmittedExecution,
  ToolList,
} from "./types.ts";

export interface AirlockClientOptions {
  /** The daemon's socket; default: `defaultSocketPath()` (`$AIRLOCK_SOCKET`, then the usual places). */
  socketPath?: string;
}

/** Per-call options. */
export interface CallOptions {
  /**
   * Aborting it closes the connection. For `execute`, `stream`, `resume` and `submitResults`
   * that cancels the execution (the daemon stops a program whose client hung up).
   */
  signal?: AbortSignal;
}

/** `events()` options. */
export interface EventsOptions extends CallOptions {
  /** Start after event number `after` (default 0: from the first). */
  after?: number;
  /** Follow a running execution to its `result` event (default true); `false`: only the events there now. */
  follow?: boolean;
}

/** A client tool's implementation: its arguments in, its value out; a throw is a `ToolError` in the program. */
export type ClientToolHandler = (args: Json, call: PendingCall) => unknown | Promise<unknown>;

/** `executeWithClientTools()` options. */
export interface ClientToolsOptions extends CallOptions {
  /** Rounds of answers before giving up and returning the waiting response (default 32). */
  maxRounds?: number;
}

/**
 * A client of `airlockd`'s agent API over its Unix socket. Every method is one HTTP request;
 * those with a whole answer reuse the client's kept connections, a stream opens its own. The
 * client keeps no other state and may be shared.
 */
export class AirlockClient {
  readonly socketPath: string;
  readonly #connections = new Connections();

  constructor(options: AirlockClientOptions = {}) {
    this.socketPath = options.socketPath ?? defaultSocketPath();
  }

  /**
   * Closes the kept idle connections (they hold no event loop open, so this is optional); a
   * later call opens a new one.
   */
  close(): void {
    this.#connections.close();
  }

  // -------------------------------------------------------------------------------------------
  // Executions

  /** Runs a program and waits for its whole response (`200` whatever the program's outcome). */
  async execute(request: ExecutionRequest, options: CallOptions = {}): Promise<ExecutionResponse> {
    if (request.wait === false) {
      throw new TypeError("execute() waits for the response: use submit() for a detached execution");
    }
    return this.json<ExecutionResponse>({
      method: "POST",
      path: "/v1/executions",
      body: request,
      signal: options.signal,
    });
  }

  /**
   * Runs a program and yields its events as they happen (NDJSON, `Accept:
   * application/x-ndjson`): `started`, `console`, `progress`, `tool_call_started`,
   * `tool_progress`, `tool_call_finished`, and last `result` with the whole response.
   * The request is sent when the iteration starts; leaving the loop before the `result`
   * event closes the connection, which cancels the execution.
   */
  stream(request: ExecutionRequest, options: CallOptions = {}): AsyncGenerator<ExecutionEvent, void, undefined> {
    if (request.wait === false) {
      throw new TypeError("stream() follows the execution it starts: use submit() and events() for a detached one");
    }
    return this.eventStream<ExecutionEvent>(
      {
        method: "POST",
        path: "/v1/executions",
        body: request,
        headers: { accept: "application/x-ndjson" },
        signal: options.signal,
      },
      true,
    );
  }

  /**
   * Starts a detached execution (`"wait": false`): the daemon answers `202` at once and runs it
   * in a session (a new one unless the request names one). Follow it with `status()`,
   * `events()` or `wait()`.
   */
  async submit(request: ExecutionRequest, options: CallOptions = {}): Promise<SubmittedExecution> {
    return this.json<SubmittedExecution>({
      method: "POST",
      path: "/v1/executions",
      body: { ...request, wait: false },
      signal: options.signal,
    });
  }

  /**
   * `GET /v1/executions/<id>`: the whole response once it ended or while it waits; while a
   * detached execution runs, `status` `queued` or `running` with the output and calls so far.
   */
  async status(id: string, options: CallOptions = {}): Promise<ExecutionState> {
    return this.json<ExecutionState>({ method: "GET", path: `/v1/executions/${enc(id)}`, signal: options.signal });
  }

  /**
   * `GET /v1/executions/<id>/events?after=N`: a detached (or waiting) execution's events, each
   * numbered (`seq`, from 1), from the one after `after`. Following (the default), it ends with
   * the `result` event.
   */
  events(id: string, options: EventsOptions = {}): AsyncGenerator<NumberedEvent, void, undefined> {
    const query = new URLSearchParams();
    query.set("after", String(options.after ?? 0));
    if (options.follow === false) {
      query.set("follow", "false");
    }
    return this.eventStream<NumberedEvent>(
      { method: "GET", path: `/v1/executions/${enc(id)}/events?${query.toString()}`, signal: options.signal },
      false,
    );
  }

  /**
   * Follows a detached execution to its `result` event and returns that response: how it
   * ended, or its `waiting` response if it waits for client results or approvals.
   */
  async wait(id: string, options: CallOptions & { after?: number } = {}): Promise<ExecutionResponse> {
    for await (const event of this.events(id, { ...options, follow: true })) {
      if (event.event === "result") {
        return withoutEventFields(event);
      }
    }
    throw new AirlockProtocolError(`the events of execution ${id} ended without a result`);
  }

  /**
   * `DELETE /v1/executions/<id>`: stops a running execution (`cancelling`; it then ends with
   * status `cancelled`) or ends a waiting one at once (`cancelled`).
   */
  async cancel(id: string, options: CallOptions = {}): Promise<CancelAnswer> {
    return this.json<CancelAnswer>({ method: "DELETE", path: `/v1/executions/${enc(id)}`, signal: options.signal });
  }

  /** `POST /v1/executions/<id>/resume`: runs an `interrupted` execution again in its session, everything replayed. */
  async resume(id: string, options: CallOptions = {}): Promise<ExecutionResponse> {
    return this.json<ExecutionResponse>({
      method: "POST",
      path: `/v1/executions/${enc(id)}/resume`,
      signal: options.signal,
    });
  }

  /**
   * `POST /v1/executions/<id>/results`: answers (some of) a waiting execution's
   * `pending_calls`. The reply is its next response: `ok`, `error`, or `waiting` again.
   */
  async submitResults(id: string, results: ClientResult[], options: CallOptions = {}): Promise<ExecutionResponse> {
    return this.json<ExecutionResponse>({
      method: "POST",
      path: `/v1/executions/${enc(id)}/results`,
      body: { results },
      signal: options.signal,
    });
  }

  /**
   * Runs a program that calls client tools (`request.client_tools`), answering each pending
   * call with its handler until the execution stops waiting for them. A handler that throws
   * answers with an error (a `ToolError` in the program). Returns the last response (still
   * `waiting` if it waits for approvals, or after `maxRounds`).
   */
  async executeWithClientTools(
    request: ExecutionRequest,
    handlers: Record<string, ClientToolHandler>,
    options: ClientToolsOptions = {},
  ): Promise<ExecutionResponse> {
    const call: CallOptions = options.signal ? { signal: options.signal } : {};
    let response = await this.execute(request, call);
    for (let round = 0; round < (options.maxRounds ?? 32); round++) {
      const pending = response.pending_calls ?? [];
      if (response.status !== "waiting" || pending.length === 0) {
        break;
      }
      const results = await Promise.all(
        pending.map(async (p): Promise<ClientResult> => {
          const handler = Object.hasOwn(handlers, p.tool) ? handlers[p.tool] : undefined;
          if (!handler) {
            return { id: p.id, error: { message: `the client has no handler for tool \`${p.tool}\`` } };
          }
          try {
            const value = await handler(p.args, p);
            return { id: p.id, ok: value === undefined ? null : value };
          } catch (e) {
            return { id: p.id, error: { message: e instanceof Error ? e.message : String(e) } };
          }
        }),
      );
      response = await this.submitResults(response.id, results, call);
    }
    return response;
  }

  /** `GET /v1/executions?status=`: the caller's executions the journal keeps (of sessions, detached or waiting). */
  async executions(options: CallOptions & { status?: ExecutionRecordStatus } = {}): Promise<ExecutionRecord[]> {
    const query = options.status ? `?status=${encodeURIComponent(options.status)}` : "";
    const answer = await this.json<{ executions: ExecutionRecord[] }>({
      method: "GET",
      path: `/v1/executions${query}`,
      signal: options.signal,
    });
    return answer.executions;
  }

  /**
   * Runs `code` in a new session (or `options.session`), and while it fails asks `fix` for new
   * code and runs that in the same session, so calls that already succeeded are replayed from
   * the journal, not made again. See `runWithRetries` in `retry.ts`.
   */
  runWithRetries(code: string, fix: FixFn, options: RetryOptions = {}): Promise<RetryOutcome> {
    return runWithRetries(this, code, fix, options);
  }

  // -------------------------------------------------------------------------------------------
  // Sessions

  /** `GET /v1/sessions`: the caller's sessions, most recently used first. */
  async sessions(options: CallOptions = {}): Promise<SessionSummary[]> {
    const answer = await this.json<{ sessions: SessionSummary[] }>({
      method: "GET",
      path: "/v1/sessions",
      signal: options.signal,
    });
    return answer.sessions;
  }

  /** `GET /v1/sessions/<id>`: one session with its recorded calls and its executions. */
  async session(id: string, options: CallOptions = {}): Promise<SessionDetail> {
    return this.json<SessionDetail>({ method: "GET", path: `/v1/sessions/${enc(id)}`, signal: options.signal });
  }

  /** `DELETE /v1/sessions/<id>`: deletes a session and all it recorded (`409 conflict` while it runs). */
  async deleteSession(id: string, options: CallOptions = {}): Promise<{ id: string; deleted: boolean }> {
    return this.json<{ id: string; deleted: boolean }>({
      method: "DELETE",
      path: `/v1/sessions/${enc(id)}`,
      signal: options.signal,
    });
  }

  // -------------------------------------------------------------------------------------------
  // Approvals

  /** `GET /v1/approvals`: what waits for a decision (an approver sees all, others their own). */
  async approvals(options: CallOptions = {}): Promise<PendingApproval[]> {
    const answer = await this.json<{ approvals: PendingApproval[] }>({
      method: "GET",
      path: "/v1/approvals",
      signal: options.signal,
    });
    return answer.approvals;
  }

  /** `POST /v1/approvals/<id>` with `{ decision, reason? }` (approvers only: others get `403 not_permitted`). */
  async decide(
    id: string,
    decision: ApprovalDecision,
    reason?: string,
    options: CallOptions = {},
  ): Promise<ApprovalDecided> {
    return this.json<ApprovalDecided>({
      method: "POST",
      path: `/v1/approvals/${enc(id)}`,
      body: reason === undefined ? { decision } : { decision, reason },
      signal: options.signal,
    });
  }

  // -------------------------------------------------------------------------------------------
  // Discovery

  /** `GET /v1/sdk`: the SDK's files (paths and sizes) and how many tools it describes. */
  async sdk(options: CallOptions = {}): Promise<SdkTree> {
    return this.json<SdkTree>({ method: "GET", path: "/v1/sdk", signal: options.signal });
  }

  /** `GET /v1/sdk/<path>`: one SDK file as text (`README.md`, `tools.d.ts`, `servers/<ns>/<tool>.ts`, ...). */
  async sdkFile(path: string, options: CallOptions = {}): Promise<string> {
    const encoded = path.split("/").map(encodeURIComponent).join("/");
    return this.text({ method: "GET", path: `/v1/sdk/${encoded}`, signal: options.signal });
  }

  /** `POST /v1/sdk`: the SDK files that change when a request declares these client tools. */
  async clientSdk(clientTools: ClientToolSpec[], options: CallOptions = {}): Promise<ClientSdk> {
    return this.json<ClientSdk>({
      method: "POST",
      path: "/v1/sdk",
      body: { client_tools: clientTools },
      signal: options.signal,
    });
  }

  /** `GET /v1/tools/search?q=&limit=`: tools ranked for the words, each with its signature and SDK file. */
  async searchTools(query: string, limit?: number, options: CallOptions = {}): Promise<SearchAnswer> {
    const params = new URLSearchParams({ q: query });
    if (limit !== undefined) {
      params.set("limit", String(limit));
    }
    return this.json<SearchAnswer>({
      method: "GET",
      path: `/v1/tools/search?${params.toString()}`,
      signal: options.signal,
    });
  }

  /** `GET /v1/tools`: the raw definitions of the caller's tools. */
  async tools(options: CallOptions = {}): Promise<ToolList> {
    return this.json<ToolList>({ method: "GET", path: "/v1/tools", signal: options.signal });
  }

  // -------------------------------------------------------------------------------------------
  // The daemon

  /** `GET /v1/health`. */
  async health(options: CallOptions = {}): Promise<Health> {
    return this.json<Health>({ method: "GET", path: "/v1/health", signal: options.signal });
  }

  /** `GET /metrics`: Prometheus text (root and the daemon's own user only: others get `403 not_permitted`). */
  async metrics(options: CallOptions = {}): Promise<string> {
    return this.text({ method: "GET", path: "/metrics", signal: options.signal });
  }

  /**
   * `POST /v1/reload` (root and the daemon's user only): the reload report, whether the new
   * policy is in force (`ok: true`, 200) or was refused (`ok: false`, 422).
   */
  async reload(options: CallOptions = {}): Promise<ReloadReport> {
    const res = await this.#connections.send(this.socketPath, {
      method: "POST",
      path: "/v1/reload",
      signal: options.signal,
    });
    if (res.statusCode === 422) {
      return parseJson<ReloadReport>(await readText(res), "POST /v1/reload");
    }
    if (!isSuccess(res)) {
      throw await apiError(res);
    }
    return parseJson<ReloadReport>(await readText(res), "POST /v1/reload");
  }

  // -------------------------------------------------------------------------------------------

  private async json<T>(options: SendOptions): Promise<T> {
    return parseJson<T>(await this.text(options), `${options.method} ${options.path}`);
  }

  private async text(options: SendOptions): Promise<string> {
    const res = await this.#connections.send(this.socketPath, options);
    if (!isSuccess(res)) {
      throw await apiError(res);
    }
    return readText(res);
  }

  private async *eventStream<E extends ExecutionEvent>(
    options: SendOptions,
    needsResult: boolean,
  ): AsyncGenerator<E, void, undefined> {
    const what = `${options.method} ${options.path}`;
    const res = await send(this.socketPath, options);
    if (!isSuccess(res)) {
      throw await apiError(res);
    }
    let sawResult = false;
    for await (const value of ndjson(res, what)) {
      if (!isObject(value) || typeof value["event"] !== "string") {
        throw new AirlockProtocolError(`an event of ${what} has no \`event\` field: ${JSON.stringify(value).slice(0, 200)}`);
      }
      const event = value as unknown as E;
      yield event;
      if (event.event === "result") {
        sawResult = true;
        return;
      }
    }
    if (needsResult && !sawResult) {
      throw new AirlockProtocolError(`the event stream of ${what} ended without a result event`);
    }
  }
}

/** The response a `result` event carries, without the event's own fields. */
export function withoutEventFields(event: ExecutionEvent & { seq?: number }): ExecutionResponse {
  if (event.event !== "result") {
    throw new TypeError(`a ${event.event} event carries no response`);
  }
  const { event: _event, seq: _seq, ...response } = event as ExecutionResponse & { event: "result"; seq?: number };
  return response;
}

function enc(id: string): string {
  return encodeURIComponent(id);
}
