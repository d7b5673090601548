"""Times pydantic-monty's worker pool the way the Airlock benchmark times its pooled workers:
one checkout + one trivial run, N times, sequentially, with GAP_MS of sleep before each (0: back
to back). Prints `p50_ms p99_ms` on one line. Usage: monty_checkout.py [N] [GAP_MS]

Used by `cargo bench -p airlock-benches --bench comparisons` when `pydantic_monty` is importable
(`pip install pydantic-monty`); `timed_run` is what paired_with_monty.py and
floor_with_monty.py time too."""
import sys
import time

from pydantic_monty import Monty

from airlock_client import percentiles


def timed_run(pool):
    """One checkout of `pool` and one run of `1 + 1` in it (ms)."""
    t = time.perf_counter()
    with pool.checkout() as session:
        result = session.feed_run("1 + 1")
    elapsed = (time.perf_counter() - t) * 1e3
    assert result == 2, result
    return elapsed


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    gap_s = float(sys.argv[2]) / 1e3 if len(sys.argv) > 2 else 0.0
    samples = []
    with Monty() as pool:
        # Warm up: let the pool start its workers.
        for _ in range(10):
            timed_run(pool)
        for _ in range(n):
            if gap_s:
                time.sleep(gap_s)
            samples.append(timed_run(pool))
    p50, p99 = percentiles(samples)
    print(f"{p50:.4f} {p99:.4f}")


if __name__ == "__main__":
    main()
