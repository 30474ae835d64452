"""Bootstrap intervals over prompts."""

from __future__ import annotations

import warnings

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


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(min_value=-10, max_value=10, allow_nan=False), min_size=2, max_size=40),
    st.floats(min_value=-100, max_value=100, allow_nan=False),
    st.integers(min_value=0, max_value=2**32 - 1),
)
def test_interval_of_a_shifted_sample_is_shifted(xs, shift, seed):
    ci = bootstrap_ci(xs, resamples=300, seed=seed)
    moved = bootstrap_ci([x + shift for x in xs], resamples=300, seed=seed)
    assert ci.low <= ci.mean + 1e-9 and ci.mean <= ci.high + 1e-9
    assert moved.low <= moved.mean + 1e-9 and moved.mean <= moved.high + 1e-9
    for a, b in ((ci.mean, moved.mean), (ci.low, moved.low), (ci.high, moved.high)):
        assert b == pytest.approx(a + shift, abs=1e-9)


def test_same_seed_same_interval_and_another_seed_another():
    xs = [0.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75] * 5
    assert bootstrap_ci(xs, seed=3) == bootstrap_ci(xs, seed=3)
    assert bootstrap_ci(xs, seed=3) != bootstrap_ci(xs, seed=4)
    assert bootstrap_ci(xs, seed=3).mean == bootstrap_ci(xs, seed=4).mean


def test_one_value_or_equal_values_give_the_point_interval_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bootstrap_ci([0.3]) == bootstrap_ci([0.3], seed=9)
        one = bootstrap_ci([0.3])
        assert (one.mean, one.low, one.high, one.n) == (0.3, 0.3, 0.3, 1)
        same = bootstrap_ci([0.1] * 7)
        assert same.low == same.mean == same.high and same.n == 7
        d = paired_diff_ci([1.0, 2.0], [0.0, 1.0])
        assert d.low == d.mean == d.high == 1.0


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
