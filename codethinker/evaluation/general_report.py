"""Table 4 (generalization, paper RQ4) as Markdown from ``metrics/generalize/<model>/<bench>.json``.

Rows: the evaluated models (base, SFT, GRPO); columns: the benchmarks by group (input prediction,
code generation, math), each cell pass@1 in % with its 95% interval over problems and the problems
evaluated; a benchmark skipped here shows its reason under the table. The paper's Table 4 cells did
not survive in the stored text; the gains its §4.5 quotes are printed beside the table.

>>> table({"sft": {"gsm8k": {"pass1": 0.25, "pass1_ci_low": 0.1, "pass1_ci_high": 0.4, "n_problems": 20,
...        "display": "GSM8K", "group": "math"}}}).splitlines()[2]
'| sft | 25.0 [10.0, 40.0] (20) |'
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codethinker.evaluation.generalize import GROUPS, SKIPPED

__all__ = ["PAPER_NOTE", "from_dir", "table", "table12"]

PAPER_NOTE = (
    "The paper's Table 4 cells did not survive in the stored text; its §4.5 quotes CodeThinker's gains over "
    "Qwen2.5-Coder-7B-Instruct: *+5.33 pp* average on mathematical reasoning, *+6.70 pp* on multilingual output "
    "reasoning (Ruby and 5 other languages), *+3.11 pp* over 17 languages of CRUXEval-X (Table 12)."
)
MODEL_ORDER = ("base", "sft", "grpo")
X_PREFIX = "cruxeval-x-"


def from_dir(root: str | os.PathLike[str] = "metrics/generalize") -> dict[str, dict[str, dict[str, Any]]]:
    """``{model: {benchmark: metrics}}`` from the generalize stage's files (an absent folder: empty)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for f in sorted(Path(root).glob("*/*.json")):
        try:
            out.setdefault(f.parent.name, {})[f.stem] = json.loads(f.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{f}: not a metrics file ({exc})") from None
    return out


def _x_mean(per: Mapping[str, Mapping[str, Any]]) -> str:
    """CRUXEval-X over the languages that ran: the mean pass@1 and how many languages."""
    ran = [m["pass1"] for b, m in per.items() if b.startswith(X_PREFIX) and "skipped" not in m]
    return f"{100 * sum(ran) / len(ran):.1f} ({len(ran)} langs)" if ran else "n/a"


def table(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """The Markdown table (CRUXEval-X as the mean over the languages that ran; per language in
    :func:`table12`), then the skipped benchmarks with their reasons."""
    order = [b for group in GROUPS.values() for b in group]
    seen = {b for per in results.values() for b, m in per.items() if "skipped" not in m and not b.startswith(X_PREFIX)}
    benches = [b for b in order if b in seen] + sorted(seen - set(order))
    display = {b: m.get("display", b) for per in results.values() for b, m in per.items()}
    models = [m for m in MODEL_ORDER if m in results] + sorted(set(results) - set(MODEL_ORDER))
    has_x = any(b.startswith(X_PREFIX) for per in results.values() for b in per)
    head = [display[b] for b in benches] + (["CRUXEval-X"] if has_x else [])
    lines = ["| model | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for model in models:
        cells = []
        for b in benches:
            m = results[model].get(b)
            if m is None or "skipped" in m:
                cells.append("n/a")
                continue
            cells.append(
                f"{100 * m['pass1']:.1f} [{100 * m['pass1_ci_low']:.1f}, {100 * m['pass1_ci_high']:.1f}] "
                f"({m['n_problems']})"
            )
        if has_x:
            cells.append(_x_mean(results[model]))
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    skipped = sorted(
        {b for per in results.values() for b, m in per.items() if "skipped" in m and not b.startswith(X_PREFIX)}
    )
    lines += [
        f"\n{b}: {SKIPPED.get(b) or next(per[b]['skipped'] for per in results.values() if b in per)}" for b in skipped
    ]
    return "\n".join(lines)


def table12(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """CRUXEval-X per language (paper Table 12): rows languages, columns models; a language whose
    runtime is missing here says so (never 0)."""
    models = [m for m in MODEL_ORDER if m in results] + sorted(set(results) - set(MODEL_ORDER))
    langs = sorted({b for per in results.values() for b in per if b.startswith(X_PREFIX)})
    lines = ["| language | " + " | ".join(models) + " |", "|---" * (len(models) + 1) + "|"]
    for b in langs:
        cells = []
        for model in models:
            m = results[model].get(b)
            if m is None:
                cells.append("n/a")
            elif "skipped" in m:
                cells.append(str(m["skipped"]).split(" (")[0])  # the reason without its detail
            else:
                cells.append(f"{100 * m['pass1']:.1f} ({m['n_problems']})")
        lines.append(f"| {b[len(X_PREFIX) :]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
