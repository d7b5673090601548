"""Times Airlock's pre-started workers and pydantic-monty's pool in pairs, from one Python
process: each pair is one trivial Airlock execution (as airlock_client.py does) and one
monty checkout + run (as monty_checkout.py does), in alternating order, with GAP_MS of sleep
before each (0: back to back; Airlock's sleep comes after its pool is full, as in
airlock_client.py). Measured this way, both see the machine in the same moment: on a shared
machine the two timed one after the other can land in different minutes, and the machine's
speed drifts between them.

When orjson is importable, every other two pairs use the same Airlock client reading the
answer's JSON with orjson instead of the standard library's json module (A M, M A, O M, M O,
...: each side follows itself as often as the other does). Monty's client decodes its answer
in native code (its extension); this one puts Airlock's client on the same footing. After
idle, CPython's json module runs cold, which costs ~40-50 µs (docs/testing.md, "The client's
own share").

Prints `airlock_p50 airlock_p99 monty_p50 monty_p99 airlock_faster_share` on one line, then,
with orjson, `orjson_p50 orjson_p99 orjson_faster_share` on the same line: a share is the
part of that client's pairs in which Airlock's execution was the faster; monty's figures are
over all its runs.
Usage: paired_with_monty.py SOCKET [N] [GAP_MS] [POOL]

Used by `cargo bench -p airlock-tests --bench spine` when `pydantic_monty` is importable."""
import json
import sys
import time

from pydantic_monty import Monty

from airlock_client import Client, percentiles
from monty_checkout import timed_run

try:
    import orjson
except ImportError:
    orjson = None

path = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
gap_s = float(sys.argv[3]) / 1e3 if len(sys.argv) > 3 else 0.0
pool_size = int(sys.argv[4]) if len(sys.argv) > 4 else 1
airlock = Client(path, gap_s, pool_size)
decoders = {"airlock": json.loads}
if orjson is not None:
    decoders["orjson"] = orjson.loads
names = list(decoders)

pairs = {name: [] for name in decoders}  # (Airlock's time, monty's time)
with Monty() as pool:
    for i in range(len(decoders) * (n + 10)):
        # Two pairs per client in turn, the first with Airlock first, the second with monty
        # first. Each gets GAP_MS of sleep right before it: Airlock's comes after its wait for
        # its pool (a health request or more, not timed), inside `timed_execution`.
        name = names[(i // 2) % len(decoders)]
        airlock.decode = decoders[name]
        if i % 2 == 0:
            a = airlock.timed_execution()
            time.sleep(gap_s)
            m = timed_run(pool)
        else:
            time.sleep(gap_s)
            m = timed_run(pool)
            a = airlock.timed_execution()
        if i >= len(decoders) * 10:  # the first ten of each warm up both
            pairs[name].append((a, m))


def figures(name):
    p50, p99 = percentiles([a for a, _ in pairs[name]])
    faster = sum(1 for a, m in pairs[name] if a < m) / len(pairs[name])
    return [p50, p99, faster]


a50, a99, a_share = figures("airlock")
m50, m99 = percentiles([m for runs in pairs.values() for _, m in runs])
out = [a50, a99, m50, m99, a_share]
if orjson is not None:
    out += figures("orjson")
print(" ".join(f"{x:.4f}" for x in out))
