"""Bootstrap confidence intervals over prompts (the unit a held-out evaluation samples).

The resampling is :func:`scipy.stats.bootstrap` (percentile method, vectorized), drawn from a
``numpy.random.Generator`` seeded with ``seed``: the same values and seed give the same interval.
Samples it refuses or cannot spread (one value, all values equal) get the point interval at the mean.

>>> ci = bootstrap_ci([1.0, 0.0, 1.0, 1.0], seed=0)
>>> ci.mean, ci.low <= ci.mean <= ci.high
(0.75, True)
>>> d = paired_diff_ci([1.0, 1.0, 0.5], [0.0, 0.5, 0.5], seed=0)  # after - before, per prompt
>>> round(d.mean, 3), d.low >= 0.0
(0.5, True)
>>> bootstrap_ci([0.25], seed=0)
CI(mean=0.25, low=0.25, high=0.25, n=1)
>>> round(pass_at_k(10, 3, 1), 3), round(pass_at_k(10, 3, 5), 3), pass_at_k(4, 0, 1)
(0.3, 0.917, 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["CI", "bootstrap_ci", "paired_diff_ci", "pass_at_k"]


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
    """Percentile bootstrap of the mean of ``values`` (one value per prompt): ``resamples`` resamples
    of ``len(values)`` prompts drawn with replacement, the interval between their ``(1 - level) / 2``
    and ``(1 + level) / 2`` quantiles. No values: ``CI(0, 0, 0, 0)``; one value or all equal: the
    point interval at the mean (scipy refuses one value; equal values have no spread to resample)."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        return CI(0.0, 0.0, 0.0, 0)
    mean = sum(xs) / n
    if n == 1 or min(xs) == max(xs):
        return CI(mean, mean, mean, n)
    from scipy.stats import bootstrap  # imported here: scipy.stats takes a while to import

    res = bootstrap(
        (np.asarray(xs),),
        np.mean,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return CI(mean, float(res.confidence_interval.low), float(res.confidence_interval.high), n)


def paired_diff_ci(
    after: Sequence[float], before: Sequence[float], level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> CI:
    """Bootstrap interval of mean(after - before) over the same prompts: the per-prompt differences
    are resampled, so each prompt's pair stays together (scipy's ``paired=True``, for this statistic)."""
    if len(after) != len(before):
        raise ValueError(f"paired values differ in length: {len(after)} vs {len(before)}")
    return bootstrap_ci([a - b for a, b in zip(after, before, strict=True)], level, resamples, seed)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one problem with ``c`` of ``n`` samples correct: 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or k < 1 or n < 1:
        raise ValueError(f"need 0 <= c <= n, n >= 1, k >= 1; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)
