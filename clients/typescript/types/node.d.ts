// The few Node.js APIs this package and its tests use, declared by hand so the type check
// needs no `@types/node` (nothing is installed to check or run the package). These are a
// subset of Node 22's real signatures; the source also type-checks against `@types/node`,
// which a project that depends on this package normally has (this file is not part of the
// package's public types: only `tsconfig.json` includes it).

declare var process: {
  env: Record<string, string | undefined>;
  version: string;
  exitCode: number | undefined;
  geteuid?: () => number;
};

declare var console: {
  log(...data: unknown[]): void;
  error(...data: unknown[]): void;
  warn(...data: unknown[]): void;
};

declare function setTimeout(callback: () => void, ms?: number): unknown;
declare function clearTimeout(handle: unknown): void;

declare class TextEncoder {
  constructor();
  encode(input?: string): Uint8Array;
}

interface AbortSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
  throwIfAborted(): void;
}
declare var AbortSignal: {
  prototype: AbortSignal;
  abort(reason?: unknown): AbortSignal;
  timeout(milliseconds: number): AbortSignal;
};

declare class AbortController {
  readonly signal: AbortSignal;
  abort(reason?: unknown): void;
}

declare module "node:events" {
  class EventEmitter {
    on(event: string, listener: (...args: any[]) => void): this;
    once(event: string, listener: (...args: any[]) => void): this;
    off(event: string, listener: (...args: any[]) => void): this;
  }
}

declare module "node:net" {
  import { EventEmitter } from "node:events";
  class Socket extends EventEmitter {
    destroy(error?: Error): this;
    readonly destroyed: boolean;
  }
}

declare module "node:http" {
  import { EventEmitter } from "node:events";
  import type { Socket } from "node:net";

  type IncomingHttpHeaders = Record<string, string | string[] | undefined>;
  type OutgoingHttpHeaders = Record<string, string | number | string[] | undefined>;

  interface RequestOptions {
    socketPath?: string;
    path?: string;
    method?: string;
    headers?: OutgoingHttpHeaders;
    agent?: Agent | false;
    signal?: AbortSignal;
  }

  interface AgentOptions {
    keepAlive?: boolean;
    maxFreeSockets?: number;
    scheduling?: "fifo" | "lifo";
  }

  class Agent extends EventEmitter {
    constructor(options?: AgentOptions);
    destroy(): void;
  }

  class IncomingMessage extends EventEmitter implements AsyncIterable<string | Uint8Array> {
    statusCode?: number;
    method?: string;
    url?: string;
    headers: IncomingHttpHeaders;
    readonly socket: Socket;
    setEncoding(encoding: "utf8"): this;
    destroy(error?: Error): this;
    resume(): this;
    [Symbol.asyncIterator](): AsyncIterator<string | Uint8Array>;
  }

  class ClientRequest extends EventEmitter {
    readonly reusedSocket: boolean;
    end(data?: string | Uint8Array): this;
    destroy(error?: Error): this;
    readonly destroyed: boolean;
  }

  class ServerResponse extends EventEmitter {
    statusCode: number;
    readonly socket: Socket | null;
    writeHead(statusCode: number, headers?: OutgoingHttpHeaders): this;
    flushHeaders(): void;
    write(chunk: string | Uint8Array): boolean;
    end(data?: string | Uint8Array): this;
    destroy(error?: Error): this;
  }

  class Server extends EventEmitter {
    listen(path: string, listeningListener?: () => void): this;
    close(callback?: (err?: Error) => void): this;
    closeAllConnections(): void;
    closeIdleConnections(): void;
  }

  function request(
    options: RequestOptions,
    callback?: (res: IncomingMessage) => void,
  ): ClientRequest;

  function createServer(
    listener: (req: IncomingMessage, res: ServerResponse) => void,
  ): Server;
}

declare module "node:fs" {
  function existsSync(path: string): boolean;
  function mkdtempSync(prefix: string): string;
  function rmSync(path: string, options?: { recursive?: boolean; force?: boolean }): void;
}

declare module "node:os" {
  function tmpdir(): string;
}

declare module "node:path" {
  function join(...paths: string[]): string;
  function dirname(path: string): string;
}

declare module "node:test" {
  interface TestOptions {
    skip?: boolean | string;
    timeout?: number;
    concurrency?: number | boolean;
  }
  type TestFn = (t: TestContext) => void | Promise<void>;
  interface TestContext {
    readonly name: string;
    diagnostic(message: string): void;
    skip(message?: string): void;
  }
  function describe(name: string, options: TestOptions, fn: () => void | Promise<void>): Promise<void>;
  function describe(name: string, fn: () => void | Promise<void>): Promise<void>;
  function it(name: string, options: TestOptions, fn: TestFn): Promise<void>;
  function it(name: string, fn: TestFn): Promise<void>;
  function test(name: string, options: TestOptions, fn: TestFn): Promise<void>;
  function test(name: string, fn: TestFn): Promise<void>;
  function before(fn: () => void | Promise<void>): void;
  function after(fn: () => void | Promise<void>): void;
}

declare module "node:assert/strict" {
  interface Assert {
    (value: unknown, message?: string): asserts value;
    ok(value: unknown, message?: string): asserts value;
    equal<T>(actual: unknown, expected: T, message?: string): asserts actual is T;
    notEqual(actual: unknown, expected: unknown, message?: string): void;
    deepEqual<T>(actual: unknown, expected: T, message?: string): asserts actual is T;
    match(value: string, regexp: RegExp, message?: string): void;
    fail(message?: string): never;
    throws(block: () => unknown, error?: ((err: unknown) => boolean) | RegExp | Function | object, message?: string): void;
    rejects(
      block: Promise<unknown> | (() => Promise<unknown>),
      error?: ((err: unknown) => boolean) | RegExp | Function | object,
      message?: string,
    ): Promise<void>;
  }
  const assert: Assert;
  export default assert;
}

declare class URLSearchParams {
  constructor(init?: Record<string, string>);
  set(name: string, value: string): void;
  toString(): string;
}
