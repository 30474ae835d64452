"""A run's headline: the few numbers of each stage that DVC lists and MLflow's parent run compares.

Each stage writes a detail report (``metrics/<stage>.json``: counts per drop reason, timings, intervals,
per-benchmark statuses) and, derived from it on the stage's normal exit, a headline file
(``metrics/headline/<stage>.json``, what ``dvc metrics show`` lists): the keys of :data:`HEADLINE`. Data
stages share the keys ``in``/``kept``/``dropped`` and the truth checks ``checked``/``mismatches``, so DVC's
table has one column for each, not one per stage. The pipeline's MLflow parent run gets the same numbers
named ``<group>/<key>`` (:func:`parent_metrics`), grouped by prefix (``data/``, ``train/``, ``reward/``,
``eval/``); the trainers' per-step metrics are grouped the same way (:func:`metric_group`).

>>> headline("grpo", {"reward_first": 0.2, "reward_last": 1.0, "mean_step_s": 9.5, "steps": 24})
{'reward_first': 0.2, 'reward_last': 1.0}
>>> parent_metrics("grpo", {"reward_first": 0.2, "reward_last": 1.0})
{'reward/grpo/reward_first': 0.2, 'reward/grpo/reward_last': 1.0}
>>> headline("ast_filter", {"problems": 10, "functions": 7, "dropped": {"too_short": 2, "needs_helper_class": 1}})
{'in': 10, 'kept': 7, 'dropped': 3}
>>> metric_group("completions/mean_length"), metric_group("rewards/crm/mean"), metric_group("loss")
('rollout/completions/mean_length', 'reward/rewards/crm/mean', 'train/loss')
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from typing import Any

from codethinker.params import flatten
from codethinker.tracking import metric_group

__all__ = ["HEADLINE", "git_commit", "headline", "metric_group", "parent_metrics", "run_name"]

Flat = dict[str, Any]
SETS = ("shape_disjoint", "in_distribution", "leetcode")


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _sum(f: Flat, suffix: str = "", prefix: str = "") -> float | None:
    vals = [v for k, v in f.items() if k.startswith(prefix) and k.endswith(suffix) and _num(v)]
    return sum(vals) if vals else None


def _keys(*pairs: tuple[str, str]) -> Callable[[Flat], Flat]:
    """Headline key <- detail key, each as it is."""
    return lambda f: {key: f.get(src) for key, src in pairs}


def _funnel(n_in: str, n_kept: str, parts: tuple[str, ...] = ("",)) -> Callable[[Flat], Flat]:
    """``in``/``kept``/``dropped`` summed over the stage's parts (``""`` and ``"synth."``)."""

    def get(f: Flat) -> Flat:
        a, b = (sum(f[p + k] for p in parts if _num(f.get(p + k))) for k in (n_in, n_kept))
        return {"in": a, "kept": b, "dropped": a - b}

    return get


def _by_reason(n_in: str, n_kept: str) -> Callable[[Flat], Flat]:
    """``in``/``kept`` as reported, ``dropped`` the sum of the report's ``dropped.<reason>`` counts."""
    return lambda f: {"in": f.get(n_in), "kept": f.get(n_kept), "dropped": _sum(f, prefix="dropped.") or 0}


def _truth(f: Flat) -> Flat:  # eval_truth and generalize_truth: per benchmark, n/passed or traced/mismatches
    checked = _sum(f, ".n") or _sum(f, ".traced")
    bad = (_sum(f, ".stored_output_mismatches") or 0) + (_sum(f, ".untraceable") or 0)
    if _sum(f, ".passed") is not None:
        bad = (_sum(f, ".n") or 0) - (_sum(f, ".passed") or 0)
    return {"checked": checked, "mismatches": bad, "skipped": sum(k.endswith(".skipped") for k in f)}


def _train_eval(f: Flat) -> Flat:
    out: Flat = {}
    for s in SETS:
        out |= {
            f"{s}/sft_reward": f.get(f"after_sft.{s}.reward"),
            f"{s}/grpo_reward": f.get(f"after_grpo.{s}.reward"),
            f"{s}/grpo_minus_sft": f.get(f"grpo_vs_sft.{s}.reward_diff"),
            f"{s}/grpo_minus_sft_ci_low": f.get(f"grpo_vs_sft.{s}.reward_diff_ci_low"),
            f"{s}/grpo_minus_sft_sampled": f.get(f"grpo_vs_sft.{s}.sampled_reward_diff"),
            f"{s}/grpo_minus_sft_sampled_ci_low": f.get(f"grpo_vs_sft.{s}.sampled_reward_diff_ci_low"),
        }
    return out


def _evaluate(f: Flat) -> Flat:  # evaluate@<model>: one file per benchmark, keys "<bench>.<key>"
    return {k.removesuffix(".pass1_mean"): v for k, v in f.items() if k.endswith(".pass1_mean")}


def _generalize(f: Flat) -> Flat:  # generalize@<model>: mean pass@1 per group of benchmarks that ran
    groups: dict[str, list[float]] = {}
    for k, v in f.items():
        bench, _, key = k.partition(".")
        if key == "pass1" and _num(v) and isinstance(f.get(f"{bench}.group"), str):
            groups.setdefault(f[f"{bench}.group"], []).append(v)
    return {f"{g}_pass1": sum(v) / len(v) for g, v in sorted(groups.items())} | {
        "benchmarks": sum(len(v) for v in groups.values())
    }


# stage -> (its MLflow group, detail -> headline)
HEADLINE: dict[str, tuple[str, Callable[[Flat], Flat]]] = {
    "fetch": ("data/fetch", _funnel("leetcode_rows", "problems")),
    "ast_filter": ("data/ast_filter", _by_reason("problems", "functions")),
    "gen_inputs": ("data/gen_inputs", _funnel("pairs_requested", "pairs")),
    "synth": ("data/synth", _funnel("requested", "pairs")),
    "exec_filter": ("data/exec_filter", _funnel("pairs_in", "samples", ("", "synth."))),
    "dedup": ("data/dedup", _funnel("samples_in", "samples", ("", "synth."))),
    "contra_sft": (
        "data/contra_sft",
        _keys(
            ("sft_rows", "sft"),
            ("grpo_prompts", "grpo_train"),
            ("heldout", "heldout.shape_disjoint.functions"),
            ("heldout_shape_overlap", "overlap.shape_disjoint.shape"),
        ),
    ),
    "codegen_data": ("data/codegen_data", _by_reason("problems_in", "problems")),
    "crpl_data": ("data/crpl_data", _by_reason("problems_in", "problems_kept")),
    "codegen_truth": (
        "data/codegen_truth",
        lambda f: {"checked": f.get("checked"), "mismatches": (f.get("checked") or 0) - (f.get("passed") or 0)},
    ),
    "eval_truth": ("data/eval_truth", _truth),
    "generalize_truth": ("data/generalize_truth", _truth),
    "reward_model": (
        "train/reward_model",
        _keys(("loss_first", "first_loss"), ("loss_last", "last_loss"), ("accuracy", "eval.all.accuracy")),
    ),
    "sft": ("train/sft", _keys(("loss_first", "first_loss"), ("loss_last", "last_loss"))),
    "grpo": ("reward/grpo", _keys(("reward_first", "reward_first"), ("reward_last", "reward_last"))),
    "grpo_codegen": ("reward/grpo_codegen", _keys(("reward_first", "reward_first"), ("reward_last", "reward_last"))),
    "train_eval": ("eval", _train_eval),
    "codegen_eval": ("eval/codegen", _keys(("sft_pass1", "after_sft.pass1"), ("grpo_pass1", "after_grpo.pass1"))),
    "evaluate": ("eval/{key}", _evaluate),
    "generalize": ("eval/{key}", _generalize),
}


def headline(stage: str, detail: dict[str, Any]) -> dict[str, float]:
    """The headline numbers of ``stage`` (``name`` or ``name@key``) from its detail report (nested or
    flat); keys the report lacks are left out; {} for a stage without a headline."""
    spec = HEADLINE.get(stage.split("@", 1)[0])
    if spec is None:
        return {}
    values = spec[1](flatten(detail))
    return {k: v if isinstance(v, int) else float(v) for k, v in values.items() if _num(v)}


def parent_metrics(stage: str, numbers: dict[str, float]) -> dict[str, float]:
    """``numbers`` (a stage's headline) named for the pipeline's parent run: ``<group>/<key>``."""
    name, _, key = stage.partition("@")
    group = HEADLINE[name][0].format(key=key) if name in HEADLINE else f"data/{name}"
    return {f"{group}/{k}": v for k, v in numbers.items()}


def run_name(command: str, commit: str | None, exp_name: str | None = None) -> str:
    """The parent run's name for ``codethinker repro``/``exp run``: the experiment's (``-n NAME``), else
    ``<command> @ <commit>`` (:func:`git_commit`), else ``<command>``.

    >>> run_name("dvc repro", "0123456789abcdef"), run_name("dvc exp run", None, "lr-5e-5")
    ('dvc repro @ 0123456', 'lr-5e-5')
    """
    if exp_name:
        return exp_name
    return f"{command} @ {commit[:7]}" if commit else command


def git_commit(root: str | os.PathLike[str] = ".") -> str | None:
    """The commit checked out at ``root``, or None (no git, no repository)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
