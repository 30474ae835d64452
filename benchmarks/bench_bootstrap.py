"""Bootstrap intervals: ``bootstrap_ci`` (scipy.stats.bootstrap, vectorized) against the pure-Python
percentile loop it replaced, timed in the same run on the same values (not a test).

    python benchmarks/bench_bootstrap.py [--n 400] [--resamples 2000] [--repeat 5]

Values: ``n`` prompt scores drawn from {0, 0.5, 1, ..., 4} (the CRM's range), seed 0; the best of
``repeat`` calls each.
"""

from __future__ import annotations

import argparse
import random
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codethinker.evaluation.stats import bootstrap_ci


def loop_ci(xs: list[float], level: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """The replaced implementation: ``random.Random(seed)`` draws, sorted means, index quantiles."""
    n = len(xs)
    rng = random.Random(seed)
    means = sorted(sum(xs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2
    return means[int(tail * (resamples - 1))], means[round((1.0 - tail) * (resamples - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(0)
    xs = [rng.choice([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]) for _ in range(args.n)]
    bootstrap_ci(xs, resamples=args.resamples)  # scipy's import, outside the timing
    new = min(timeit.repeat(lambda: bootstrap_ci(xs, resamples=args.resamples), number=1, repeat=args.repeat))
    old = min(timeit.repeat(lambda: loop_ci(xs, resamples=args.resamples), number=1, repeat=args.repeat))
    ci, (lo, hi) = bootstrap_ci(xs, resamples=args.resamples), loop_ci(xs, resamples=args.resamples)
    print(f"n {args.n}, {args.resamples} resamples, best of {args.repeat}")
    print(f"scipy  {new * 1e3:8.1f} ms   [{ci.low:.4f}, {ci.high:.4f}]")
    print(f"loop   {old * 1e3:8.1f} ms   [{lo:.4f}, {hi:.4f}]")
    print(f"loop / scipy {old / new:.1f}x")


if __name__ == "__main__":
    main()
