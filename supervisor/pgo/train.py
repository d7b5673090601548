"""The load `regenerate` runs the instrumented airlockd under to take its profile: what agents
send, through both front doors, and not only the benchmark's `1 + 1`. Executions of TypeScript
and JavaScript that return values, call a tool, fail to parse, throw and time out; sessions,
detached executions and their status; tool search and the SDK; health; the MCP door
(initialize, list, execute). Every other one after 10 ms of sleep, every other one back to back,
as the daemon meets requests in use.

Usage: train.py SOCKET [ROUNDS]. Only the standard library (and tests/benches/airlock_client.py)."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "benches"))
from airlock_client import connect, request  # noqa: E402

PROGRAMS = [
    "1 + 1",
    "const a: number[] = [1, 2, 3]; a.map((x) => x * 2).reduce((p, c) => p + c, 0)",
    "interface P { name: string }\nconst p: P = { name: 'x' };\np.name.toUpperCase()",
    "const found = await tools.airlock.search_tools({ query: 'search' });\nfound",
    "let x = ;",
    "throw new Error('boom')",
    "JSON.stringify({ a: [1, 2, { b: 'c' }] })",
    "let s = 0; for (let i = 0; i < 10000; i++) { s += i } s",
    "enum E { A, B }\nE.B",
    "const m = new Map<string, number>(); m.set('a', 1); [...m.keys()]",
    "undefinedName.property",
    "return { ok: true, items: Array.from({ length: 50 }, (_, i) => ({ i })) }",
]


def execute(s, body):
    status, answer = request(s, "POST", "/v1/executions", json.dumps(body).encode())
    if status >= 500:
        raise SystemExit(f"the daemon failed: {status} {answer}")
    return answer


def mcp(s, session, method, params, id_=1):
    message = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        message["id"] = id_
    body = json.dumps(message).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nhost: airlock\r\ncontent-type: application/json\r\n"
        "accept: application/json, text/event-stream\r\n"
        + (f"mcp-session-id: {session}\r\n" if session else "")
        + f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    s.sendall(head + body)
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, rest = data.split(b"\r\n\r\n", 1)
    length, session_id = 0, session
    for line in head.split(b"\r\n")[1:]:
        name, value = line.split(b":", 1)
        if name.strip().lower() == b"content-length":
            length = int(value)
        if name.strip().lower() == b"mcp-session-id":
            session_id = value.strip().decode()
    while len(rest) < length:
        rest += s.recv(65536)
    return int(head.split(b" ", 2)[1]), session_id


def main():
    path = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 150
    s, h, m = connect(path), connect(path), connect(path)
    _, session = mcp(m, None, "initialize", {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "airlock-pgo-train", "version": "1"}})
    mcp(m, session, "notifications/initialized", {}, id_=None)
    # A session: its tool call recorded once, then answered from the journal (replay).
    agent_session = execute(s, {"code": PROGRAMS[3], "session": "new"}).get("session")
    for r in range(rounds):
        for i, code in enumerate(PROGRAMS):
            if (r + i) % 2:
                time.sleep(0.01)
            language = "javascript" if i == 6 else "typescript"
            execute(s, {"code": code, "language": language, "timeout_ms": 30000})
        execute(s, {"code": "while (true) {}", "timeout_ms": 50})
        if agent_session:
            execute(s, {"code": PROGRAMS[3], "session": agent_session})
        detached = execute(s, {"code": "2 * 21", "wait": False})
        if "id" in detached:
            request(h, "GET", f"/v1/executions/{detached['id']}")
        for target in ["/v1/health", "/v1/tools", "/v1/tools/search?q=search"]:
            request(h, "GET", target)
        if r % 10 == 0:
            request(h, "GET", "/v1/sdk")
        mcp(m, session, "tools/list", {}, id_=r + 2)
        mcp(m, session, "tools/call", {"name": "execute", "arguments": {"code": "1 + 1"}}, id_=r + 2)
    print(f"trained: {rounds} rounds of {len(PROGRAMS) + 3} executions and the requests around them")


if __name__ == "__main__":
    main()
