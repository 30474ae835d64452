"""Paper Table 2 in miniature: GRPO ablations from one SFT checkpoint, several seeds each, scored by
``train_eval`` on held-out prompts (mean CRM reward, answer accuracy, RCS, format-valid rate).

Each (variant, seed) is one DVC experiment that reruns only ``grpo`` and ``train_eval`` (the SFT
model and the data are unchanged, so DVC takes them from its cache)::

    dvc exp run train_eval -n t2-nodbs-s1 -S grpo.seed=1 -S grpo.rollout.n_dbs=0 -S grpo.rollout.n_regular=8

:func:`commands` spells all of them; ``codethinker report --exps auto`` reads ``dvc exp show
--json``, groups the experiments by variant (from their ``grpo`` params, not their names) and seed,
and prints mean ± sample standard deviation over seeds. A variant's difference from the full method
is marked when it exceeds the seed noise: ``|Δ| > 2 * sqrt(sd_v² / n_v + sd_full² / n_full)`` (two
standard errors of the difference of means; with 3 seeds a rough screen, not a test).

Below the ablations, the baselines trained by the reward switch (:data:`BASELINES`, ``grpo.reward``:
``reward-orm`` = CodeReasoner, ``reward-whitebox`` = ExecVerify; ``commands(variants=BASELINES)``), as
distinct rows: their held-out metrics are scored with their own reward and prompt format
(``train_eval``'s ``reward_kind``), so their reward column is on that reward's scale (0-2, not CRM's
0-4) and gets no Δ; accuracy, RCS and format-valid rate compare directly. The ``orm`` *variant* stays
what it was: the CRM ablation without the process reward (``grpo.crm.prm=false``).

>>> commands(seeds=(1,))[1]
'dvc exp run train_eval -n t2-nodbs-s1 -S grpo.seed=1 -S grpo.rollout.n_dbs=0 -S grpo.rollout.n_regular=8'
>>> commands(seeds=(1,), variants=BASELINES)[0]
'dvc exp run train_eval -n t2-reward-orm-s1 -S grpo.seed=1 -S grpo.reward=orm'
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from codethinker.evaluation.report_sources import dotted, exp_runs, grpo_seed
from codethinker.params import flatten

__all__ = [
    "BASELINES",
    "METRICS",
    "SEEDS",
    "SWITCHES",
    "VARIANTS",
    "Variant",
    "collect",
    "commands",
    "same_setup",
    "table",
    "variant_of",
]


@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    switches: tuple[tuple[str, Any], ...]  # params.yaml keys (under grpo) set with -S


VARIANTS = (
    Variant("full", "CodeThinker (DBS + CRM)", ()),
    Variant("nodbs", "w/o DBS (8 regular samples)", (("rollout.n_dbs", 0), ("rollout.n_regular", 8))),
    Variant("nogate", "w/o the gate (R_res paid without a full trace)", (("crm.gate", False),)),
    Variant("noprefix", "w/o prefix consistency (each block on its own)", (("crm.prefix", False),)),
    Variant("orm", "outcome reward only (R_res)", (("crm.prm", False),)),
    Variant("noccw", "w/o CCW (equal block weights)", (("crm.ccw", False),)),
)
# The other rewards of the switch (grpo.reward), each with its own prompt format and all 8 samples regular.
BASELINES = (
    Variant("reward-orm", "CodeReasoner: reward=orm (vanilla prompt, outcome reward)", (("reward", "orm"),)),
    Variant("reward-whitebox", "ExecVerify: reward=whitebox (white-box questions)", (("reward", "whitebox"),)),
)
GROUP = 8  # samples per prompt in every row (the baselines draw them all regularly)
SEEDS = (0, 1, 2)
METRICS = (
    ("reward", "reward"),
    ("answer_acc", "accuracy"),
    ("rcs", "RCS"),
    ("fmt_rate", "format-valid"),
    ("sampled_reward", "reward, sampled"),  # train_eval's sampled pass (GRPO's temperature); – where a run has none
)
DEFAULTS = {"rollout.n_dbs": 4, "rollout.n_regular": 4, "crm.gate": True, "crm.prefix": True, "crm.prm": True,
            "crm.ccw": True}  # fmt: skip


def _dash(v: Any) -> str:
    return str(v).lower()


def commands(
    seeds: Iterable[int] = SEEDS, target: str = "train_eval", variants: Iterable[Variant] = VARIANTS
) -> list[str]:
    """One ``dvc exp run`` per (variant, seed), variants in table order (``variants=BASELINES``: the
    baseline rewards)."""
    out = []
    seeds = tuple(seeds)
    for v in variants:
        for s in seeds:
            sets = [f"-S grpo.seed={s}"] + [f"-S grpo.{k}={_dash(x)}" for k, x in v.switches]
            out.append(f"dvc exp run {target} -n t2-{v.key}-s{s} " + " ".join(sets))
    return out


def variant_of(params: Mapping[str, Any]) -> str | None:
    """The variant a params.yaml belongs to (None: a combination that is not in the table).

    >>> variant_of({"grpo": {"crm": {"gate": False}, "rollout": {"n_dbs": 4, "n_regular": 4}}})
    'nogate'
    >>> variant_of({"grpo": {"reward": "orm", "rollout": {"n_dbs": 4, "n_regular": 4}}})
    'reward-orm'
    """
    grpo = params.get("grpo") or {}
    reward = dotted(grpo, "reward") or "crm"
    if reward != "crm":  # a baseline: the CRM switches do not apply; DBS samples are drawn regularly
        sizes = {k: dotted(grpo, k) for k in ("rollout.n_dbs", "rollout.n_regular")}
        group = sum(DEFAULTS[k] if n is None else int(n) for k, n in sizes.items())
        return next((v.key for v in BASELINES if dict(v.switches)["reward"] == reward and group == GROUP), None)
    got = {k: dotted(grpo, k) for k in DEFAULTS}
    got = {k: (DEFAULTS[k] if v is None else v) for k, v in got.items()}
    for v in VARIANTS:
        want = {**DEFAULTS, **dict(v.switches)}
        if all(got[k] == want[k] for k in DEFAULTS):
            return v.key
    return None


# What a row of the table may change: the seed, the reward switch and the variants' switches. An experiment
# that changes anything else (a temperature, a learning rate, the data) is another setup, not a row.
SWITCHES = frozenset({"grpo.seed", "grpo.reward", *(f"grpo.{k}" for k in DEFAULTS)})


def same_setup(params: Mapping[str, Any], reference: Mapping[str, Any]) -> bool:
    """Whether ``params`` differs from ``reference`` in the table's :data:`SWITCHES` only.

    >>> same_setup({"grpo": {"seed": 1, "lr": 2}}, {"grpo": {"seed": None, "lr": 2}})
    True
    >>> same_setup({"grpo": {"seed": 1, "lr": 3}}, {"grpo": {"seed": None, "lr": 2}})
    False
    """
    a, b = flatten(dict(params)), flatten(dict(reference))
    return {k: v for k, v in a.items() if k not in SWITCHES} == {k: v for k, v in b.items() if k not in SWITCHES}


def _reference(data: list[dict[str, Any]]) -> dict[str, Any]:
    """params.yaml of the commit the experiments start from (the workspace's where the commit has none)."""
    tops = [t for t in data if t.get("rev") != "workspace"] + [t for t in data if t.get("rev") == "workspace"]
    for top in tops:
        params = (((top.get("data") or {}).get("params") or {}).get("params.yaml") or {}).get("data")
        if params:
            return params
    return {}


HEADLINE = ("shape_disjoint", "synth")  # train_eval's headline set; runs written before held-out sets: "synth"


def collect(exp_show: list[dict[str, Any]] | str, source: str | None = None) -> dict[str, dict[int, dict[str, Any]]]:
    """``{variant: {seed: {"name", "after_grpo": summary, "after_sft": summary}}}`` from ``dvc exp show
    --json`` on the held-out set ``source`` (None: the first of :data:`HEADLINE` an experiment has); a
    (variant, seed) seen twice keeps the first listed (DVC lists the newest first). Experiments whose params
    differ from their commit's beyond the table's switches (:func:`same_setup`) are left out."""
    data = json.loads(exp_show) if isinstance(exp_show, str) else exp_show
    reference = _reference(data)
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for name, params, metrics in exp_runs(data, "metrics/train_eval.json"):
        after = metrics.get("after_grpo") or {}
        src = source or next((k for k in HEADLINE if k in after), HEADLINE[0])
        grpo_m = after.get(src)
        variant = variant_of(params)
        if variant is None or not grpo_m or not same_setup(params, reference):
            continue
        if metrics.get("reward_kind", "crm") != (dotted(params, "grpo.reward") or "crm"):
            continue  # scored with another reward than the params say (metrics of an older run)
        sft_m = (metrics.get("after_sft") or {}).get(src)
        entry = {"name": name, "after_grpo": grpo_m, "after_sft": sft_m}
        out.setdefault(variant, {}).setdefault(grpo_seed(params), entry)
    return out


def _stats(xs: list[float]) -> tuple[float, float, int]:
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0), len(xs)


def table(collected: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> str:
    """Markdown: one row per variant (and the SFT model), mean ± sd over seeds; ``*`` marks a
    difference from the full method larger than two standard errors."""
    head = "| variant | seeds | " + " | ".join(label for _, label in METRICS) + " |"
    lines = [head, "|---" * (len(METRICS) + 2) + "|"]
    full = collected.get("full", {})

    def values(runs: Mapping[int, Mapping[str, Any]], key: str, phase: str = "after_grpo") -> list[float]:
        return [float(r[phase][key]) for r in runs.values() if r.get(phase) and key in r[phase]]

    sft_runs = {s: r for runs in collected.values() for s, r in runs.items() if r.get("after_sft")}
    if sft_runs:
        first = next(iter(sft_runs.values()))["after_sft"]
        cells = [f"{float(first[k]):.3f}" if k in first else "–" for k, _ in METRICS]
        lines.append("| w/o RL (the SFT checkpoint every row starts from) | – | " + " | ".join(cells) + " |")
    for v in (*VARIANTS, *BASELINES):
        runs = collected.get(v.key, {})
        if not runs:
            lines.append(f"| {v.label} | 0 | " + " | ".join("not run" for _ in METRICS) + " |")
            continue
        cells = []
        for k, _ in METRICS:
            if not values(runs, k):
                cells.append("–")
                continue
            m, sd, n = _stats(values(runs, k))
            cell = f"{m:.3f} ± {sd:.3f}"
            base = values(full, k)
            own_scale = v in BASELINES and k == "reward"  # its own reward, not CRM's: no Δ
            if v.key != "full" and not own_scale and len(base) > 1 and n > 1:
                fm, fsd, fn = _stats(base)
                diff, noise = m - fm, 2 * math.sqrt(sd**2 / n + fsd**2 / fn)
                beyond = abs(diff) > noise and abs(diff) >= 5e-4  # not a rounding residue below the 3 decimals
                cell += f" ({diff:+.3f}{'*' if beyond else ''})"
            cells.append(cell)
        lines.append(f"| {v.label} | {len(runs)} ({', '.join(map(str, sorted(runs)))}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)
