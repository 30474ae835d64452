"""The paper's tables from evaluation runs, as Markdown (``codethinker report``).

Sources of results (one per call):

- ``metrics`` (default): the evaluate stage's files ``metrics/eval/<model>/<bench>.json``;
- ``mlflow``: the newest finished MLflow run per model tagged ``eval.model`` (stage runs
  ``evaluate@<model>`` and ``codethinker eval`` runs);
- for Table 2, DVC experiments: the JSON of ``dvc exp show --json`` (each ablation is one
  ``dvc exp run``, see :func:`ablation_commands`); without it, the ablation rows list the commands.

The readers of these sources are in :mod:`codethinker.evaluation.report_sources`.

Tables: (1) models x benchmarks with the average, pass@1 as mean ± std over the runs, in %;
(2) the ablations of paper Table 2; (3) thinking depth (generated tokens) and RCS from base to
SFT to GRPO. Numbers quoted from the paper are marked "(paper)": they are Qwen2.5-Coder-7B-Instruct
figures from the paper's text, not results of this project.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from codethinker.evaluation.benchmarks import BENCHMARKS, DISPLAY, PAPER_COUNTS
from codethinker.evaluation.report_sources import ModelResult, from_dvc_exps, from_metrics_dir, from_mlflow

__all__ = [
    "ABLATIONS",
    "Ablation",
    "ModelResult",
    "ablation_commands",
    "from_dvc_exps",
    "from_metrics_dir",
    "from_mlflow",
    "render_report",
]

# The paper's own numbers (Qwen2.5-Coder-7B-Instruct; the text survived, Tables 1/2 did not).
PAPER = {
    "average": {"CodeThinker": 82.57, "CodeReasoner": 82.57 - 3.37, "ExecVerify": 82.57 - 5.16},
    "gain_over_codereasoner": {"cruxeval": 3.43, "livecodebench": 1.71, "reval": 4.95},
    "rcs": {"base": 14.62, "grpo": 55.08},
    "tokens": {"base": 693, "sft": 815, "grpo": 1118},
}
MODEL_LABEL = {"base": "base (zero-shot ConTra)", "sft": "SFT (ConTra)", "grpo": "GRPO (DBS + CRM)"}


@dataclass(frozen=True)
class Ablation:
    key: str  # DVC experiment name (or "workspace")
    label: str
    model: str  # which evaluated model of that run is the row
    switches: tuple[tuple[str, Any], ...]  # params.yaml keys set with -S
    paper_delta: float  # the paper's drop of the 3-benchmark average vs the full method, pp


_NO_DBS = (("grpo.rollout.n_dbs", 0), ("grpo.rollout.n_regular", 8))
ABLATIONS = (
    Ablation("workspace", "CodeThinker (SFT + GRPO, DBS, CRM)", "grpo", (), 0.0),
    Ablation("workspace", "w/o RL (the SFT model)", "sft", (), -9.89),
    Ablation("wo-dbs", "w/o DBS (8 regular samples)", "grpo", _NO_DBS, -1.09),
    Ablation("wo-dbs-prm", "w/o DBS, w/o PRM", "grpo", (*_NO_DBS, ("grpo.crm.prm", False)), -1.09 - 0.92),
    Ablation("wo-dbs-rcc", "w/o DBS, w/o RCC (the gate)", "grpo", (*_NO_DBS, ("grpo.crm.gate", False)), -1.09 - 0.22),
    Ablation("wo-dbs-orm", "w/o DBS, w/o ORM", "grpo", (*_NO_DBS, ("grpo.crm.orm", False)), -1.09 - 0.41),
    Ablation("wo-dbs-ccw", "w/o DBS, w/o CCW", "grpo", (*_NO_DBS, ("grpo.crm.ccw", False)), -1.09 - 0.73),
)


def ablation_commands(params: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The exact ``dvc exp run`` command per ablation; a key that params.yaml lacks gets DVC's ``+``."""

    def has(key: str) -> bool:
        node: Any = params or {}
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return False
            node = node[part]
        return True

    cmds = {}
    for a in ABLATIONS:
        if a.key == "workspace":
            continue
        sets = " ".join(f"-S '{'' if has(k) else '+'}{k}={str(v).lower()}'" for k, v in a.switches)
        cmds[a.key] = f"dvc exp run -n {a.key} {sets}"
    return cmds


# --------------------------------------------------------------------------- tables
def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.2f}"


def _cell(m: dict[str, Any] | None) -> str:
    if not m:
        return "–"
    if m.get("skipped"):
        return "skipped"
    if m.get("pass1_mean") is None:
        return "–"
    runs = m.get("runs") or (m.get("config") or {}).get("runs")
    if runs is not None and int(runs) < 2:  # one run: no spread to show
        return _pct(m["pass1_mean"])
    return f"{_pct(m['pass1_mean'])} ± {_pct(m.get('pass1_std') or 0.0)}"


def _average(res: ModelResult) -> tuple[float | None, int]:
    vals = [m["pass1_mean"] for m in res.scored().values()]
    return (statistics.fmean(vals) if vals else None), len(vals)


def _avg_cell(res: ModelResult) -> str:
    avg, n = _average(res)
    if avg is None:
        return "–"
    return _pct(avg) + ("" if n == len(BENCHMARKS) else f" ({n}/{len(BENCHMARKS)})")


def _order(names: Iterable[str]) -> list[str]:
    pref = ["base", "sft", "grpo"]
    names = list(names)
    return [n for n in pref if n in names] + sorted(n for n in names if n not in pref)


def table1(results: Mapping[str, ModelResult]) -> str:
    head = "| model | " + " | ".join(DISPLAY[b] for b in BENCHMARKS) + " | Avg |"
    lines = [head, "|---" * (len(BENCHMARKS) + 2) + "|"]
    for name in _order(results):
        r = results[name]
        cells = [_cell(r.benches.get(b)) for b in BENCHMARKS]
        lines.append(f"| {MODEL_LABEL.get(name, name)} | " + " | ".join(cells) + f" | {_avg_cell(r)} |")
    for label, avg in PAPER["average"].items():
        lines.append(
            f"| *{label}, Qwen2.5-Coder-7B-Instruct (paper)* | "
            + " | ".join("n/a" for _ in BENCHMARKS)
            + f" | *{avg:.2f}* |"
        )
    return "\n".join(lines)


def table2(exps: Mapping[str, Mapping[str, ModelResult]], commands: Mapping[str, str]) -> str:
    full = exps.get("workspace", {}).get("grpo")
    full_avg = _average(full)[0] if full else None
    head = "| variant | " + " | ".join(DISPLAY[b] for b in BENCHMARKS) + " | Avg | Δ Avg (pp) | *Δ Avg (paper)* | how |"
    lines = [head, "|---" * (len(BENCHMARKS) + 5) + "|"]
    for a in ABLATIONS:
        res = exps.get(a.key, {}).get(a.model)
        how = "`dvc repro`" if a.key == "workspace" else f"`{commands[a.key]}`"
        if a.key == "workspace" and a.model == "sft":
            how = "the `sft` row of `dvc repro`"
        if res is None:
            cells, avg_c, delta = ["not run"] * len(BENCHMARKS), "–", "–"
        else:
            cells = [_cell(res.benches.get(b)) for b in BENCHMARKS]
            avg = _average(res)[0]
            avg_c = _avg_cell(res)
            delta = "–" if avg is None or full_avg is None else f"{100 * (avg - full_avg):+.2f}"
        paper = "0" if a.paper_delta == 0 else f"{a.paper_delta:+.2f}"
        lines.append(f"| {a.label} | " + " | ".join(cells) + f" | {avg_c} | {delta} | *{paper}* | {how} |")
    return "\n".join(lines)


def depth_rcs_table(results: Mapping[str, ModelResult]) -> str:
    lines = [
        "| model | RCS (×100) per benchmark | RCS avg | *RCS (paper)* | tokens per answer | tokens avg "
        "| *tokens (paper)* | format-valid | strict pass@1 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in _order(results):
        scored = results[name].scored()
        rcs = {b: m["rcs_mean"] for b, m in scored.items() if m.get("rcs_mean") is not None}
        tok = {b: m["tokens_mean"] for b, m in scored.items() if m.get("tokens_mean") is not None}
        fmt = [m["fmt_rate"] for m in scored.values() if m.get("fmt_rate") is not None]
        strict = [m["pass1_strict_mean"] for m in scored.values() if m.get("pass1_strict_mean") is not None]
        rcs_txt = ", ".join(f"{DISPLAY[b]} {_pct(v)}" for b, v in rcs.items()) or "n/a (vanilla)"
        tok_txt = ", ".join(f"{DISPLAY[b]} {v:.0f}" for b, v in tok.items()) or "–"
        rcs_avg = _pct(statistics.fmean(rcs.values())) if rcs else "–"
        tok_avg = f"{statistics.fmean(tok.values()):.0f}" if tok else "–"
        p_rcs, p_tok = PAPER["rcs"].get(name), PAPER["tokens"].get(name)
        lines.append(
            f"| {MODEL_LABEL.get(name, name)} | {rcs_txt} | {rcs_avg} | *{p_rcs if p_rcs is not None else '–'}* "
            f"| {tok_txt} | {tok_avg} | *{p_tok if p_tok is not None else '–'}* "
            f"| {_pct(statistics.fmean(fmt)) if fmt else '–'} % | {_pct(statistics.fmean(strict)) if strict else '–'} |"
        )
    return "\n".join(lines)


def counts_table(results: Mapping[str, ModelResult]) -> str:
    lines = ["| benchmark | samples scored | untraceable | paper's count | note |", "|---|---|---|---|---|"]
    for b in BENCHMARKS:
        ms = [r.benches[b] for r in results.values() if b in r.benches]
        m = next((x for x in ms if not x.get("skipped")), ms[0] if ms else None)
        if m is None:
            lines.append(f"| {DISPLAY[b]} | – | – | {PAPER_COUNTS[b]} | not evaluated |")
        elif m.get("skipped"):
            lines.append(f"| {DISPLAY[b]} | 0 | – | {PAPER_COUNTS[b]} | {m['skipped']} |")
        else:
            n, u = (f"{m[k]:.0f}" if isinstance(m.get(k), int | float) else "–" for k in ("n_samples", "untraceable"))
            lines.append(f"| {DISPLAY[b]} | {n} | {u} | {PAPER_COUNTS[b]} | |")
    return "\n".join(lines)


def _config_line(results: Mapping[str, ModelResult]) -> str:
    for r in results.values():
        for m in r.scored().values():
            c = m.get("config") or {}
            if c:
                last = c.get("seed", 0) + c.get("runs", 1) - 1
                return (
                    f"Settings: {c.get('runs')} runs (seeds {c.get('seed')}..{last}), "
                    f"temperature {c.get('temperature')}, max_tokens {c.get('max_tokens')}, "
                    f"format {m['model'].get('format', '?')}."
                )
    return ""


def _opening(results: Mapping[str, ModelResult], title: str, note: str | None) -> list[str]:
    """The title, how pass@1 is judged and where the results come from, the settings, the samples and
    Table 1."""
    src = sorted({r.source for r in results.values()})
    return [
        f"# {title}",
        "",
        *([note, ""] if note else []),
        "pass@1 in % as mean ± sample std over the sampled runs, judged like the public harnesses "
        "(`assert true_output == predicted_literal` with Python `==`; the literal is read with "
        "`ast.literal_eval`, model text is never executed). *Italic* numbers are the paper's "
        "(Qwen2.5-Coder-7B-Instruct), not results of this project. Source: " + ", ".join(src) + ".",
        "",
        _config_line(results),
        "",
        "## Samples",
        "",
        counts_table(results),
        "",
        "## Table 1: code reasoning accuracy (pass@1, %)",
        "",
        table1(results),
        "",
        "The paper's per-benchmark Table 1 did not survive in the stored text; its average and its gains "
        "over CodeReasoner (+3.43 CRUXEval-O, +1.71 LCB-O, +4.95 REval-FO) did. An average marked "
        "(k/3) covers only the k benchmarks evaluated.",
        "",
    ]


def _ablations(
    exps: Mapping[str, Mapping[str, ModelResult]], params: Mapping[str, Any] | None, micro: Mapping[str, Any] | None
) -> list[str]:
    """Table 2 (the DVC experiments) and Table 2 in miniature (train_eval), with their commands."""
    from codethinker.evaluation import micro_table

    return [
        "## Table 2: ablations",
        "",
        table2(exps, ablation_commands(params)),
        "",
        "Δ Avg is against the full method of the same source. The paper removes PRM, RCC, ORM and CCW "
        "each *on top of* w/o DBS; its Δ here is the w/o DBS drop (−1.09) plus the extra drop quoted in "
        "its §4.3. RCC is read as the gate of R_res (docs/decisions.md).",
        "",
        "## Table 2 in miniature (train_eval: held-out generated programs)",
        "",
        micro_table.table(micro or {}),
        "",
        "Mean ± sample std over seeds of the after-GRPO held-out metrics; (Δ) vs the full method, `*` where "
        "|Δ| exceeds two standard errors of the difference (seed noise). Every row starts from the same SFT "
        "checkpoint with the same sampling budget (8 completions per prompt). The baseline rows (reward=orm, "
        "reward=whitebox) are scored with their own reward and prompt format: their reward is on a 0-2 scale and "
        "has no Δ. Commands (one experiment each):",
        "",
        "```",
        *micro_table.commands(),
        *micro_table.commands(variants=micro_table.BASELINES),
        "```",
        "",
    ]


def _generalization(general: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """Table 4 and, when a language was evaluated, Table 12 (CRUXEval-X per language)."""
    from codethinker.evaluation import general_report

    parts = [
        "## Table 4: generalization (pass@1, %, [95% interval over problems] (problems))",
        "",
        general_report.table(general),
        "",
        general_report.PAPER_NOTE,
        "",
    ]
    x_table = general_report.table12(general)
    if len(x_table.splitlines()) > 2:  # a language evaluated
        parts += ["## Table 12: CRUXEval-X per language (pass@1, %, (problems))", "", x_table, ""]
    return parts


def render_report(
    results: Mapping[str, ModelResult],
    exps: Mapping[str, Mapping[str, ModelResult]] | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    title: str = "Results",
    note: str | None = None,
    micro: Mapping[str, Any] | None = None,
    general: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    codegen: Mapping[str, Mapping[int, Mapping[str, Any]]] | None = None,
) -> str:
    """The whole Markdown report: samples, Table 1, Table 2, Table 2 in miniature (``micro``: the
    :func:`codethinker.evaluation.micro_table.collect` of the experiments), thinking depth and RCS, and
    Table 4 (``general``: :func:`codethinker.evaluation.general_report.from_dir`) when given, and the
    code-generation recipes (``codegen``: :func:`codethinker.evaluation.codegen_report.collect`) when given."""
    exps = dict(exps or {})
    if "workspace" not in exps:
        exps["workspace"] = dict(results)
    parts = [
        *_opening(results, title, note),
        *_ablations(exps, params, micro),
        "## Thinking depth and RCS (base → SFT → GRPO)",
        "",
        depth_rcs_table(results),
        "",
        "RCS: share of blocks before the first wrong LOCALS, 0 for a broken format (×100, the paper's "
        "scale). Thinking depth: generated tokens per answer, capped by max_tokens.",
        "",
    ]
    if general:
        parts += _generalization(general)
    if codegen is not None:
        from codethinker.evaluation import codegen_report

        parts += codegen_report.section(codegen)
    return "\n".join(parts)
