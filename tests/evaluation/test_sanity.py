"""The harness's own sanity models on the full CRUXEval-O and REval-FO: an oracle scores 100%
pass@1 and RCS 1.0; an always-``None`` model scores exactly the share of ``None`` outputs."""

from __future__ import annotations

import pytest

from codethinker.evaluation.benchmarks import PAPER_COUNTS
from codethinker.evaluation.harness import EvalConfig, ModelSpec, evaluate_samples, summarize
from tests.evaluation.scripted import LookupEngine, constant_text, oracle_text

pytestmark = pytest.mark.needs_shared
BENCHES = ["cruxeval", "reval"]


def _score(bench, engine, fmt, runs=2):
    config = EvalConfig(runs=runs, max_tokens=64)
    records, timing = evaluate_samples(engine, bench.samples, fmt, config)
    spec = ModelSpec(name="scripted", model="scripted", format=fmt)
    return summarize(
        records,
        timing,
        benchmark=bench.name,
        spec=spec,
        config=config,
        n_problems=bench.n_problems,
        untraced=bench.untraced,
    )


@pytest.mark.parametrize("name", BENCHES)
def test_full_benchmark_is_traced(traced, name):
    bench = traced[name]
    assert bench.n_problems == PAPER_COUNTS[name]  # 800 and 651, the paper's counts
    assert bench.untraced == []
    assert bench.mismatches == [] or all(m["note"] == "stored output is not a literal" for m in bench.mismatches)


@pytest.mark.parametrize("fmt", ["contra", "vanilla"])
@pytest.mark.parametrize("name", BENCHES)
def test_oracle_scores_everything(traced, name, fmt):
    bench = traced[name]
    m = _score(bench, LookupEngine(bench.samples, fmt, oracle_text), fmt)
    assert m["n_samples"] == len(bench.samples)
    assert m["pass1_mean"] == 1.0 and m["pass1_std"] == 0.0
    assert m["pass1_strict_mean"] == 1.0
    assert m["fmt_rate"] == 1.0 and m["answer_rate"] == 1.0
    if fmt == "contra":
        assert m["rcs_mean"] == 1.0
    else:
        assert m["rcs_mean"] is None


@pytest.mark.parametrize("fmt", ["contra", "vanilla"])
@pytest.mark.parametrize("name", BENCHES)
def test_none_model_scores_the_none_share(traced, name, fmt):
    bench = traced[name]
    share = sum(s.flow.output is None for s in bench.samples) / len(bench.samples)
    assert share > 0 or name == "cruxeval"  # REval-FO: 2 of 651 outputs are None; CRUXEval-O: none
    m = _score(bench, LookupEngine(bench.samples, fmt, constant_text), fmt)
    assert m["pass1_mean"] == pytest.approx(share, abs=1e-12)
    assert m["pass1_runs"] == [pytest.approx(share, abs=1e-12)] * 2
    assert m["answer_rate"] == 1.0
    if fmt == "contra":  # no blocks: the strict format fails, so RCS is 0 (accuracy does not need it)
        assert m["fmt_rate"] == 0.0 and m["rcs_mean"] == 0.0 and m["pass1_strict_mean"] == 0.0
    else:
        assert m["fmt_rate"] == 1.0 and m["pass1_strict_mean"] == pytest.approx(share, abs=1e-12)


@pytest.mark.parametrize("name", BENCHES)
def test_true_model_shows_the_harness_equality(traced, name):
    """``assert out == True`` passes for ``1`` and ``1.0`` too (the public harnesses' ``==``);
    the strict check of the reward counts only ``True`` itself."""
    bench = traced[name]
    loose = sum(bool(s.flow.output == True) for s in bench.samples) / len(bench.samples)  # noqa: E712
    strict = sum(s.flow.output is True for s in bench.samples) / len(bench.samples)
    m = _score(bench, LookupEngine(bench.samples, "vanilla", lambda s, f: constant_text(s, f, "True")), "vanilla")
    assert m["pass1_mean"] == pytest.approx(loose, abs=1e-12)
    assert m["pass1_strict_mean"] == pytest.approx(strict, abs=1e-12)
    assert loose > strict
