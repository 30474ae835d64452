"""What a stage shows in DVC's views, derived from its detail reports when it ends: its headline metrics file
and the tables of the plots DVC cannot draw from a report (the data funnel, the held-out evaluation).

A stage's ``dvc.yaml`` entry names them. Its detail reports are its outs under ``metrics/`` (a JSON file, or a
folder of ``<name>.json``: evaluate's per-benchmark reports); its ``metrics`` under ``metrics/headline/`` get
:func:`codethinker.ops.headline.headline` of those reports; its ``plots`` named in :data:`TABLES` get their
table. :func:`codethinker.ops.runs.stage_run` calls :func:`write_views` on the stage's normal exit, before
MLflow logs the stage, with tracking on or off.

>>> funnel_rows({"default": {"steps": [{"step": "0 source", "count": 9, "unit": "problems", "paper": None}]}})
[{'step': '1. source', 'count': 9, 'unit': 'problems', 'paper': ''}]
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codethinker.data.io import atomic_write, write_json
from codethinker.ops.dvcfile import declared
from codethinker.ops.headline import SETS, headline

__all__ = ["TABLES", "detail_paths", "end_line", "eval_rows", "funnel_rows", "read_detail", "write_views"]

HEADLINE_DIR = Path("metrics/headline")


def detail_paths(stage: str, root: str | Path = ".") -> list[Path]:
    """The detail reports ``stage`` declares: outs under ``metrics/``, and metrics outside ``metrics/headline/``
    (a project whose stages write their own metrics files)."""
    root = Path(root).resolve()
    decl = declared(stage, root)

    def under(p: str, folder: str) -> bool:
        return Path(p).resolve().is_relative_to(root / folder)

    outs = [p for p in decl.get("outs", []) if under(p, "metrics")]
    return [Path(p) for p in outs + [m for m in decl.get("metrics", []) if not under(m, str(HEADLINE_DIR))]]


def read_detail(paths: list[Path]) -> dict[str, Any]:
    """The reports merged: a file's keys as they are, a folder's ``<name>.json`` under ``<name>``; a missing
    or unreadable file is left out."""
    merged: dict[str, Any] = {}
    for p in paths:
        files = sorted(p.glob("*.json")) if p.is_dir() else [p] if p.suffix == ".json" else []
        for f in files:
            try:
                data = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                merged.update({f.stem: data} if p.is_dir() else data)
    return merged


def funnel_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """``plots/funnel.csv`` from ``metrics/funnel.json``: a row per step of the run's profile (the first one)."""
    block = next((v for v in data.values() if isinstance(v, dict) and "steps" in v), {})
    steps = block.get("steps", [])
    width = len(str(len(steps)))
    return [  # numbered in pipeline order: a bar chart sorts its categories by name
        {
            "step": f"{i:0{width}d}. {s['step'].lstrip('0123456789 ')}",
            "count": s["count"],
            "unit": s.get("unit", ""),
            "paper": s.get("paper") or "",
        }
        for i, s in enumerate(steps, 1)
    ]


def eval_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """``plots/train_eval.csv`` from ``metrics/train_eval.json``: a row per (held-out set, model), greedy and
    sampled reward with their 95% intervals."""
    rows = []
    for s in SETS:
        for phase in ("before_sft", "after_sft", "after_grpo"):
            m = (data.get(phase) or {}).get(s)
            if isinstance(m, dict) and "reward" in m:
                rows.append(
                    {"set": s, "model": phase, "label": f"{s} / {phase}"}
                    | {k: m.get(k, "") for k in ("reward", "reward_ci_low", "reward_ci_high", "sampled_reward")}
                )
    return rows


TABLES: dict[str, tuple[str, Callable[[dict[str, Any]], list[dict[str, Any]]]]] = {
    "funnel.csv": ("funnel", funnel_rows),  # plot file name -> (the detail report's stem, its rows)
    "train_eval.csv": ("train_eval", eval_rows),
}


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with atomic_write(path) as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["step"], lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def write_views(stage: str, root: str | Path = ".") -> list[Path]:
    """Write ``stage``'s headline metrics files and plot tables (see the module doc); the paths written."""
    root = Path(root).resolve()
    decl = declared(stage, root)
    if not decl:
        return []
    details = detail_paths(stage, root)
    written: list[Path] = []
    # only under metrics/headline/: a metrics file elsewhere is a report the stage wrote, never replaced
    heads = [Path(m) for m in decl.get("metrics", []) if Path(m).is_relative_to(root / HEADLINE_DIR)]
    if heads:
        numbers = headline(stage, read_detail(details))
        for h in heads:
            write_json(h, numbers)
            written.append(h)
    for p in map(Path, decl.get("plots", [])):
        if p.name in TABLES:
            stem, rows = TABLES[p.name]
            source = next((d for d in details if d.stem == stem), None)
            if source is not None and source.is_file():
                _write_csv(p, rows(json.loads(source.read_text())))
                written.append(p)
    return written


SHOWN = 6  # headline numbers on a stage's last line


def end_line(stage: str, seconds: float, root: str | Path = ".") -> str:
    """The line a stage ends with: its name, wall time and headline numbers.

    >>> end_line("nothing_declared", 12.34)
    'nothing_declared: done in 12 s'
    """
    numbers = headline(stage, read_detail(detail_paths(stage, root))) if declared(stage, root) else {}
    items = [f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in numbers.items()]
    if len(items) > SHOWN:
        items = [*items[:SHOWN], f"{len(items) - SHOWN} more in its headline file"]
    return " · ".join([f"{stage}: done in {seconds:.0f} s", *items])
