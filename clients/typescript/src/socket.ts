import { existsSync } from "node:fs";
import { join } from "node:path";

/** The system daemon's socket (`airlockd.socket`, `RuntimeDirectory=airlock`). */
export const SYSTEM_SOCKET = "/run/airlock/airlock.sock";

/**
 * The socket to use when none is given, as the `airlock` CLI chooses it: `$AIRLOCK_SOCKET`;
 * else the user's own daemon (`$XDG_RUNTIME_DIR/airlock/airlock.sock`, or
 * `/run/airlock/airlock.sock` for root) if that socket exists; else the system daemon's if it
 * exists; else the user default (so a connection error names it).
 */
export function defaultSocketPath(
  env: Record<string, string | undefined> = process.env,
  euid: number | undefined = process.geteuid?.(),
  exists: (path: string) => boolean = existsSync,
): string {
  const given = env["AIRLOCK_SOCKET"];
  if (given) {
    return given;
  }
  const user =
    euid === 0
      ? SYSTEM_SOCKET
      : env["XDG_RUNTIME_DIR"]
        ? join(env["XDG_RUNTIME_DIR"], "airlock", "airlock.sock")
        : undefined;
  if (user !== undefined && exists(user)) {
    return user;
  }
  if (exists(SYSTEM_SOCKET)) {
    return SYSTEM_SOCKET;
  }
  return user ?? SYSTEM_SOCKET;
}
