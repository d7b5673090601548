"""Times Airlock's pre-started workers and pydantic-monty's pool in pairs, from one Python
process: each pair is one trivial Airlock execution (as airlock_client.py does) and one
monty checkout + run (as monty_checkout.py does), in alternating order, with GAP_MS of sleep
before each (0: back to back; Airlock's sleep comes after its pool is full, as in
airlock_client.py). Measured this way, both see the machine in the same moment: on a shared
machine the two timed one after the other can land in different minutes, and the machine's
speed drifts between them.

Airlock's side is timed with up to three clients, in turn (A M, M A, O M, M O, P M, M P,
...: each side follows itself as often as the other does):
- the bench's own client (airlock_client.py: raw HTTP, the standard library's json);
- the same client reading the answer's JSON with orjson, when orjson is importable. Monty's
  client decodes its answer in native code (its extension); this one puts Airlock's client on
  the same footing. After idle, CPython's json module runs cold, which costs ~40-50 µs
  (docs/performance.md, "The client's own share");
- the shipped Python package (clients/python, `airlock_client.Client.execute`, which returns
  a typed `ExecutionResponse`), when httpx (its dependency) is importable: what a Python user
  of Airlock sees.

Prints `airlock_p50 airlock_p99 monty_p50 monty_p99 airlock_faster_share`, then
`orjson_p50 orjson_p99 orjson_faster_share`, then `package_p50 package_p99
package_faster_share`, on one line (`nan` for a client not timed): a share is the part of
that client's pairs in which Airlock's execution was the faster; monty's figures are over
all its runs.
Usage: paired_with_monty.py SOCKET [N] [GAP_MS] [POOL]; AIRLOCK_BENCH_LANGUAGE=python times
Airlock's Python engine (the program `1 + 1` is the same in both languages).

Used by `cargo bench -p airlock-benches --bench comparisons` when `pydantic_monty` is importable."""
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

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


def package_client():
    """The shipped package, imported from the repository under a name of its own (this
    directory's airlock_client.py has its import name), or None without httpx."""
    try:
        import httpx  # noqa: F401  (its one dependency)
    except ImportError:
        return None
    root = Path(__file__).resolve().parents[1] / "clients/python/src/airlock_client"
    spec = importlib.util.spec_from_file_location(
        "airlock_client_package", root / "__init__.py", submodule_search_locations=[str(root)]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    spec.loader.exec_module(package)
    return package.Client(path)


def with_decoder(decode):
    def timed():
        airlock.decode = decode
        return airlock.timed_execution()

    return timed


clients = {"airlock": with_decoder(json.loads)}
if orjson is not None:
    clients["orjson"] = with_decoder(orjson.loads)
package = package_client()
if package is not None:

    def timed_package():
        """As `timed_execution`, through the package's `execute`."""
        airlock.wait_for_pool()
        if gap_s:
            time.sleep(gap_s)
        t = time.perf_counter()
        response = package.execute("1 + 1", language=airlock.language, timeout_ms=30000)
        elapsed = (time.perf_counter() - t) * 1e3
        assert response.status == "ok", response
        assert response.stats.worker_from_pool, response.stats
        return elapsed

    clients["package"] = timed_package
names = list(clients)

pairs = {name: [] for name in clients}  # (Airlock's time, monty's time)
with Monty() as pool:
    for i in range(len(clients) * (n + 10)):
        # Two pairs per client in turn, the first with Airlock first, the second with monty
        # first. Each gets GAP_MS of sleep right before it: Airlock's comes after its wait for
        # its pool (a health request or more, not timed).
        name = names[(i // 2) % len(clients)]
        if i % 2 == 0:
            a = clients[name]()
            time.sleep(gap_s)
            m = timed_run(pool)
        else:
            time.sleep(gap_s)
            m = timed_run(pool)
            a = clients[name]()
        if i >= len(clients) * 10:  # the first ten of each warm up both
            pairs[name].append((a, m))


def figures(name):
    if name not in pairs:
        return [math.nan] * 3
    p50, p99 = percentiles([a for a, _ in pairs[name]])
    faster = sum(1 for a, m in pairs[name] if a < m) / len(pairs[name])
    return [p50, p99, faster]


a50, a99, a_share = figures("airlock")
m50, m99 = percentiles([m for runs in pairs.values() for _, m in runs])
out = [a50, a99, m50, m99, a_share] + figures("orjson") + figures("package")
print(" ".join(f"{x:.4f}" for x in out))
