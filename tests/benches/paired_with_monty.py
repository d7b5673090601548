"""Times Airlock's pre-started workers and pydantic-monty's pool in pairs, from one Python
process: each round runs one trivial Airlock execution (as airlock_client.py does) and one
monty checkout + run (as monty_checkout.py does), in alternating order, with GAP_MS of sleep
before each (0: back to back; Airlock's sleep comes after its pool is full, as in
airlock_client.py). Measured this way, both see the machine in the same moment: on a shared
machine the two timed one after the other can land in different minutes, and the machine's
speed drifts between them. Prints `airlock_p50 airlock_p99 monty_p50 monty_p99
airlock_faster_share` on one line: the last figure is the share of pairs in which Airlock's
execution was the faster of the two.
Usage: paired_with_monty.py SOCKET [N] [GAP_MS] [POOL]

Used by `cargo bench -p airlock-tests --bench spine` when `pydantic_monty` is importable."""
import sys
import time

from pydantic_monty import Monty

from airlock_client import Client, percentiles
from monty_checkout import timed_run

path = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
gap_s = float(sys.argv[3]) / 1e3 if len(sys.argv) > 3 else 0.0
pool_size = int(sys.argv[4]) if len(sys.argv) > 4 else 1
airlock = Client(path, gap_s, pool_size)


pairs = []
with Monty() as pool:
    for i in range(n + 10):
        # Each gets GAP_MS of sleep right before it: Airlock's comes after its wait for its
        # pool (a health request or more, not timed), inside `timed_execution`.
        if i % 2 == 0:
            a = airlock.timed_execution()
            time.sleep(gap_s)
            m = timed_run(pool)
        else:
            time.sleep(gap_s)
            m = timed_run(pool)
            a = airlock.timed_execution()
        if i >= 10:  # the first ten warm up both
            pairs.append((a, m))
a50, a99 = percentiles([a for a, _ in pairs])
m50, m99 = percentiles([m for _, m in pairs])
faster = sum(1 for a, m in pairs if a < m) / len(pairs)
print(f"{a50:.4f} {a99:.4f} {m50:.4f} {m99:.4f} {faster:.3f}")
