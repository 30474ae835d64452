"""Bootstrap intervals over prompts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.evaluation.stats import bootstrap_ci, paired_diff_ci


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(min_value=-10, max_value=10, allow_nan=False), min_size=1, max_size=40))
def test_interval_contains_the_mean_and_stays_in_range(xs):
    ci = bootstrap_ci(xs, resamples=200)
    assert min(xs) - 1e-9 <= ci.low <= ci.mean + 1e-9 <= ci.high + 2e-9 <= max(xs) + 3e-9
    assert ci.n == len(xs)


def test_constant_values_give_a_point_and_noise_gives_width():
    assert bootstrap_ci([0.5] * 30) == bootstrap_ci([0.5] * 30, seed=7)
    c = bootstrap_ci([0.5] * 30)
    assert c.low == c.mean == c.high == 0.5
    w = bootstrap_ci([0.0, 1.0] * 15)
    assert 0.2 < w.low < 0.5 < w.high < 0.8
    narrow = bootstrap_ci([0.0, 1.0] * 200)
    assert narrow.high - narrow.low < w.high - w.low  # more prompts, tighter interval


def test_paired_difference():
    d = paired_diff_ci([1.0] * 30, [0.0] * 29 + [1.0])
    assert d.mean == pytest.approx(29 / 30) and d.low > 0.8
    assert bootstrap_ci([]).n == 0
    with pytest.raises(ValueError, match="differ in length"):
        paired_diff_ci([1.0], [1.0, 2.0])
    assert d.as_dict("reward_diff") == {
        "reward_diff": d.mean,
        "reward_diff_ci_low": d.low,
        "reward_diff_ci_high": d.high,
    }
