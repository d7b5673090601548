"""Times, in rounds from one Python process, the floor under a pre-started Airlock execution
beside Airlock and pydantic-monty's pool: each round sends one request to each of the
`airlock-bench-floor` servers (`direct`: two hops; `hyper`: two hops through hyper and tokio;
`relay`: four hops, a fresh pre-forked process per request, torn down 1 ms after the answer;
`relay-at-once`: torn down and replaced right after the answer), then `GET /v1/health` and one
trivial execution on Airlock's pre-started worker, then one monty checkout + run, each with
GAP_MS of sleep before it (Airlock's after its pool is full, as in airlock_client.py). All
share the machine's moment, as in paired_with_monty.py. Prints the seven p50s (ms) on one line
in that order: direct hyper relay relay-at-once airlock-health airlock-execution monty.
Usage: floor_with_monty.py AIRLOCK_SOCKET DIRECT HYPER RELAY RELAY_AT_ONCE [N] [GAP_MS] [POOL]

Used by `cargo bench -p airlock-benches --bench comparisons` when `pydantic_monty` is importable."""
import sys
import time

from pydantic_monty import Monty

from airlock_client import Client, connect, percentiles, timed_get
from monty_checkout import timed_run

airlock_socket, direct, hyper, relay, relay_at_once = sys.argv[1:6]
n = int(sys.argv[6]) if len(sys.argv) > 6 else 300
gap_s = float(sys.argv[7]) / 1e3 if len(sys.argv) > 7 else 0.0
pool_size = int(sys.argv[8]) if len(sys.argv) > 8 else 1
airlock = Client(airlock_socket, gap_s, pool_size)
floors = {name: connect(path) for name, path in
          [("direct", direct), ("hyper", hyper), ("relay", relay), ("relay-at-once", relay_at_once)]}


names = list(floors) + ["airlock-health", "airlock-execution", "monty"]
samples = {name: [] for name in names}
with Monty() as pool:
    for i in range(n + 10):
        for name in names:
            if name == "airlock-execution":
                elapsed = airlock.timed_execution()  # waits for the pool, then GAP_MS
            elif name == "airlock-health":
                airlock.wait_for_pool()
                time.sleep(gap_s)
                elapsed = timed_get(airlock.health)
            else:
                time.sleep(gap_s)
                elapsed = timed_run(pool) if name == "monty" else timed_get(floors[name])
            if i >= 10:  # the first ten warm up every path
                samples[name].append(elapsed)
print(" ".join(f"{percentiles(samples[name])[0]:.4f}" for name in names))
