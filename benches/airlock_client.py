"""Times Airlock's pre-started workers from a separate Python process, the way
monty_checkout.py times pydantic-monty's pool from Python: one trivial execution
(`POST /v1/executions`, HTTP/1.1 on the daemon's Unix socket, a kept connection), N times,
sequentially. Before each, it asks `GET /v1/health` (on a second connection) until POOL workers
are idle, every GAP_MS (0: back to back), so every execution takes a pre-started worker, as in
the Rust client's measurement; then, with a GAP_MS, it sleeps that long once more, so that the
daemon sits as idle before the request as monty's pool does in monty_checkout.py (the health
request that found the pool full does not warm it up). Prints `p50_ms p99_ms` on one line.
Usage: airlock_client.py SOCKET [N] [GAP_MS] [POOL]

Used by `cargo bench -p airlock-benches --bench comparisons`; only the standard library."""
import json
import os
import socket
import sys
import time


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def request(s, method, target, body=b"", decode=json.loads):
    head = (
        f"{method} {target} HTTP/1.1\r\nhost: airlock\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    s.sendall(head + body)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("the daemon closed the connection")
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, value = line.split(b":", 1)
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        rest += s.recv(65536)
    return status, decode(rest)


class Client:
    """One kept connection for executions, one for health, as in the Rust client's measurement.
    `decode` reads the execution's JSON answer: the standard library's (paired_with_monty.py
    sets orjson's in turn)."""

    def __init__(self, path, gap_s, pool):
        self.executions, self.health = connect(path), connect(path)
        self.gap_s, self.pool, self.decode = gap_s, pool, json.loads
        # `1 + 1` is the same program in TypeScript and Python; AIRLOCK_BENCH_LANGUAGE picks
        # which engine runs it (comparisons.rs times both against monty).
        self.language = os.environ.get("AIRLOCK_BENCH_LANGUAGE", "typescript")
        self.body = json.dumps(
            {"code": "1 + 1", "language": self.language, "timeout_ms": 30000}
        ).encode()

    def wait_for_pool(self):
        while True:
            _, health = request(self.health, "GET", "/v1/health")
            if health["pool"]["idle"] >= self.pool:
                return
            if self.gap_s:
                time.sleep(self.gap_s)

    def timed_execution(self):
        """Waits for the pool and then GAP_MS more, then times one trivial execution (ms)."""
        self.wait_for_pool()
        if self.gap_s:
            time.sleep(self.gap_s)
        t = time.perf_counter()
        status, response = request(
            self.executions, "POST", "/v1/executions", self.body, self.decode
        )
        elapsed = (time.perf_counter() - t) * 1e3
        assert status == 200 and response["status"] == "ok", response
        assert response["stats"]["worker_from_pool"], response["stats"]
        return elapsed


def timed_get(s):
    """One `GET /v1/health` on connection `s` (ms); the floor's servers answer any request."""
    t = time.perf_counter()
    status, _ = request(s, "GET", "/v1/health")
    elapsed = (time.perf_counter() - t) * 1e3
    assert status == 200, status
    return elapsed


def percentiles(samples):
    samples = sorted(samples)
    p50 = samples[len(samples) // 2]
    p99 = samples[min(len(samples) - 1, round((len(samples) - 1) * 0.99))]
    return p50, p99


def main():
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    gap_s = float(sys.argv[3]) / 1e3 if len(sys.argv) > 3 else 0.0
    pool = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    client = Client(path, gap_s, pool)
    samples = []
    for i in range(n + 10):
        elapsed = client.timed_execution()
        if i >= 10:  # the first ten warm up, as in monty_checkout.py
            samples.append(elapsed)
    p50, p99 = percentiles(samples)
    print(f"{p50:.4f} {p99:.4f}")


if __name__ == "__main__":
    main()
