"""Times a tight loop, each request sent as soon as the last one answered (no wait for
Airlock's pool to fill again), on four paths in blocks from one Python process: Airlock's
trivial execution, the `airlock-bench-floor` pool of fresh pre-forked processes (`relay-pool`:
Airlock's pool with none of its code) twice, small and with a worker-sized heap whose pages
each process copies, and pydantic-monty's pool (checkout + run). A fresh process per request
pays its fork, its copies and its exit on every request of such a loop; monty's reused process
pays none. The blocks rotate (BLOCKS rounds of N on each path after 20 to warm up) so that
every path meets the machine's moments. Prints five figures on one line: the four p50s (ms)
in that order, then the share of Airlock's executions that found a pre-started worker.
Usage: tight_with_monty.py AIRLOCK_SOCKET FLOOR_SMALL FLOOR_WORKER_SIZED [N] [BLOCKS]

Used by `cargo bench -p airlock-benches --bench comparisons` when `pydantic_monty` is importable."""
import json
import sys
import time

from pydantic_monty import Monty

from airlock_client import connect, percentiles, request, timed_get
from monty_checkout import timed_run

airlock_socket, floor_small, floor_sized = sys.argv[1:4]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 500
blocks = int(sys.argv[5]) if len(sys.argv) > 5 else 3
body = json.dumps({"code": "1 + 1", "timeout_ms": 30000}).encode()
connections = {"airlock": connect(airlock_socket), "floor-small": connect(floor_small),
               "floor-worker-sized": connect(floor_sized)}
names = ["airlock", "floor-small", "floor-worker-sized", "monty"]
samples = {name: [] for name in names}
from_pool = 0


def timed(name, pool):
    """One request on `name` (ms), and whether it found a pre-started worker (Airlock's only)."""
    if name == "monty":
        return timed_run(pool), False
    if name != "airlock":
        return timed_get(connections[name]), False
    t = time.perf_counter()
    status, answer = request(connections[name], "POST", "/v1/executions", body)
    elapsed = (time.perf_counter() - t) * 1e3
    assert status == 200 and answer["status"] == "ok", answer
    return elapsed, answer["stats"]["worker_from_pool"]


with Monty() as pool:
    for block in range(blocks):
        # Each block starts with a different path.
        for name in names[block % len(names):] + names[:block % len(names)]:
            for i in range(n + 20):
                elapsed, pooled = timed(name, pool)
                if i >= 20:
                    samples[name].append(elapsed)
                    from_pool += pooled
figures = [percentiles(samples[name])[0] for name in names]
print(" ".join(f"{f:.4f}" for f in figures), f"{from_pool / (n * blocks):.4f}")
