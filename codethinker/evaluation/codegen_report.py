"""The code-generation recipes side by side (docs/codegen.md "GRPO recipes"): outcome-only GRPO, ReCode's
CG-GRPO (gated and ungated) and ReflexiCoder, each trained by the grpo_codegen stage with ``grpo_codegen.reward``
and scored by ``codegen_eval`` on the same held-out problems.

Each (recipe, seed) is one DVC experiment (:func:`commands`); ``codethinker report --exps auto`` reads
``dvc exp show --json``, groups the experiments by recipe (their ``grpo_codegen.reward`` param, not their
names) and seed (:func:`collect`), and prints one row per recipe with the mean ± sample standard
deviation over seeds of the after-GRPO pass@1, tokens per answer, format-valid rate and, for ReflexiCoder,
the reflection cycles (:func:`table`).

>>> commands(seeds=(0,))[0]
'dvc exp run codegen_eval -n cg-codegen_outcome-s0 -S grpo_codegen.reward=codegen_outcome -S grpo_codegen.seed=0'
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from codethinker.evaluation.report_sources import dotted, exp_runs, grpo_seed

__all__ = ["COLUMNS", "RECIPES", "collect", "commands", "table"]

METRICS_FILE = "metrics/codegen_eval.json"
RECIPES = {  # grpo_codegen.reward -> the row's label
    "codegen_outcome": "outcome-only GRPO (R_fmt + R_out)",
    "cg_grpo": "CG-GRPO (ReCode, gated R_proc)",
    "cg_grpo_ungated": "CG-GRPO, ungated",
    "recode_outcome": "outcome-only GRPO, ReCode's format",
    "reflexicoder": "ReflexiCoder",
}
COLUMNS = (("pass1", "pass@1"), ("tokens", "tokens / answer"), ("fmt_rate", "format-valid"), ("cycles", "cycles"))
SEEDS = (0, 1, 2)


def commands(seeds: Iterable[int] = SEEDS, recipes: Iterable[str] = tuple(RECIPES)) -> list[str]:
    """One ``dvc exp run`` per (recipe, seed): grpo_codegen and codegen_eval rerun, the data and SFT come from
    the cache."""
    return [
        f"dvc exp run codegen_eval -n cg-{r}-s{s} -S grpo_codegen.reward={r} -S grpo_codegen.seed={s}"
        for r in recipes
        for s in seeds
    ]


def collect(exp_show: list[dict[str, Any]] | str) -> dict[str, dict[int, dict[str, Any]]]:
    """``{recipe: {seed: {"name", "after_grpo": summary, "after_sft": summary}}}`` from ``dvc exp show --json``
    (experiments whose metrics were scored for another reward than their params name are left out; a
    (recipe, seed) seen twice keeps the first listed, DVC's newest)."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for name, params, metrics in exp_runs(exp_show, METRICS_FILE):
        recipe = dotted(params, "grpo_codegen.reward")
        if recipe not in RECIPES:
            continue
        after = metrics.get("after_grpo")
        if not isinstance(after, Mapping) or "pass1" not in after or metrics.get("reward_kind") != recipe:
            continue
        entry = {"name": name, "after_grpo": dict(after), "after_sft": metrics.get("after_sft")}
        seed = dotted(params, "grpo_codegen.seed")  # else grpo's (the section takes grpo's settings)
        out.setdefault(recipe, {}).setdefault(grpo_seed(params) if seed is None else int(seed), entry)
    return out


def _cell(values: list[float], digits: int) -> str:
    if not values:
        return "–"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.{digits}f} ± {sd:.{digits}f}"


def table(collected: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> str:
    """Markdown: one row per recipe (mean ± sample std over its seeds of the after-GRPO metrics); a recipe
    not run says so. ``cycles`` only for ReflexiCoder."""
    head = "| recipe (grpo_codegen.reward) | seeds | " + " | ".join(label for _, label in COLUMNS) + " |"
    lines = [head, "|---" * (len(COLUMNS) + 2) + "|"]
    for recipe, label in RECIPES.items():
        runs = collected.get(recipe, {})
        if not runs:
            lines.append(f"| {label} (`{recipe}`) | 0 | " + " | ".join("not run" for _ in COLUMNS) + " |")
            continue
        cells = []
        for key, _ in COLUMNS:
            vals = [float(r["after_grpo"][key]) for r in runs.values() if key in r["after_grpo"]]
            cells.append(_cell(vals, 1 if key == "tokens" else 3))
        seeds = f"{len(runs)} ({', '.join(map(str, sorted(runs)))})"
        lines.append(f"| {label} (`{recipe}`) | {seeds} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def section(collected: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> list[str]:
    """The report's section: the table, what it measures and the commands that fill it."""
    return [
        "## Code generation: GRPO recipes (codegen_eval: held-out problems)",
        "",
        table(collected),
        "",
        "Mean ± sample std over seeds of the after-GRPO metrics on codegen_data's held-out problems (greedy). "
        "pass@1: the answer's (ReflexiCoder: the last answer's) program passes every test; tokens / answer: "
        "generated tokens per response; cycles: ReflexiCoder's reflection cycles (a broken response counts 0). "
        "Commands (one experiment each):",
        "",
        "```",
        *commands(),
        "```",
        "",
    ]
