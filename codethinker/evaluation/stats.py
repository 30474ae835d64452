"""Bootstrap confidence intervals over prompts (the unit a held-out evaluation samples).

>>> ci = bootstrap_ci([1.0, 0.0, 1.0, 1.0], seed=0)
>>> ci.mean, ci.low <= ci.mean <= ci.high
(0.75, True)
>>> d = paired_diff_ci([1.0, 1.0, 0.5], [0.0, 0.5, 0.5], seed=0)  # after - before, per prompt
>>> round(d.mean, 3), d.low >= 0.0
(0.5, True)
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass

__all__ = ["CI", "bootstrap_ci", "paired_diff_ci"]


@dataclass(frozen=True)
class CI:
    mean: float
    low: float
    high: float
    n: int

    def as_dict(self, prefix: str) -> dict[str, float]:
        """``{prefix: mean, prefix_ci_low: low, prefix_ci_high: high}`` (the flat metric names)."""
        d = asdict(self)
        return {prefix: d["mean"], f"{prefix}_ci_low": d["low"], f"{prefix}_ci_high": d["high"]}


def bootstrap_ci(values: Sequence[float], level: float = 0.95, resamples: int = 2000, seed: int = 0) -> CI:
    """Percentile bootstrap of the mean of ``values`` (one value per prompt)."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        return CI(0.0, 0.0, 0.0, 0)
    rng = random.Random(seed)
    means = sorted(sum(xs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2
    lo = means[int(tail * (resamples - 1))]
    hi = means[round((1.0 - tail) * (resamples - 1))]
    return CI(sum(xs) / n, lo, hi, n)


def paired_diff_ci(
    after: Sequence[float], before: Sequence[float], level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> CI:
    """Bootstrap interval of mean(after - before) over the same prompts (resampled in pairs)."""
    if len(after) != len(before):
        raise ValueError(f"paired values differ in length: {len(after)} vs {len(before)}")
    return bootstrap_ci([a - b for a, b in zip(after, before, strict=True)], level, resamples, seed)
