"""The plots of ``dvc.yaml`` as static images, rendered offline.

``dvc plots show`` writes an HTML page whose chart library comes from a CDN, so it is blank without a
network. This renders the same top-level ``plots:`` definitions (``x``, ``y: {file: [columns]}``,
``title``, ``x_label``, ``y_label``) with matplotlib: one PNG per plot, a colour and a legend entry per
series, titled axes, plus one overview image holding every plot (``plots.png``); and two charts DVC's
plots cannot draw from their files: the data funnel (``funnel.png``, from ``metrics/funnel.json``) and the
held-out evaluation with its intervals (``train_eval.png``, from ``metrics/train_eval.json``).

Run: ``codethinker plots --out docs/img`` (after ``dvc repro``; a plot whose file is missing is skipped
and named).

>>> specs = plot_specs(".")  # doctest: +SKIP
>>> [s.name for s in specs][:1]  # doctest: +SKIP
['grpo_reward_by_kind']
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codethinker.ops.dvcfile import read

__all__ = ["PlotSpec", "funnel_steps", "plot_specs", "read_series", "render_all", "render_funnel", "render_train_eval"]


@dataclass(frozen=True)
class PlotSpec:
    name: str
    title: str
    x: str
    x_label: str
    y_label: str
    series: tuple[tuple[str, str], ...]  # (csv file, column)


def plot_specs(root: str | Path = ".") -> list[PlotSpec]:
    """The top-level ``plots:`` of ``root/dvc.yaml`` (a list of one-key mappings, DVC's layout)."""
    doc = read(Path(root) / "dvc.yaml")
    specs = []
    for entry in doc.get("plots") or []:
        if not isinstance(entry, dict):  # a bare file path: DVC's defaults, nothing to title
            continue
        for name, d in entry.items():
            d = d or {}
            series = []
            for file, cols in (d.get("y") or {}).items():
                series += [(file, c) for c in ([cols] if isinstance(cols, str) else cols)]
            x = d.get("x", "step")
            specs.append(
                PlotSpec(
                    name=name,
                    title=d.get("title", name),
                    x=x,
                    x_label=d.get("x_label", x),
                    y_label=d.get("y_label", ", ".join(c for _, c in series)),
                    series=tuple(series),
                )
            )
    return specs


def read_series(path: Path, x: str, column: str) -> tuple[list[float], list[float]]:
    """(xs, ys) of one CSV column against ``x``; empty or non-numeric cells are left out."""
    xs, ys = [], []
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            try:
                xv, yv = float(row[x]), float(row[column])
            except (KeyError, TypeError, ValueError):
                continue
            xs.append(xv)
            ys.append(yv)
    return xs, ys


def _draw(ax: Any, spec: PlotSpec, root: Path) -> list[str]:
    """Draw one plot on ``ax``; returns the files it could not read."""
    missing = []
    for i, (file, column) in enumerate(spec.series):
        path = root / file
        if not path.exists():
            missing.append(file)
            continue
        xs, ys = read_series(path, spec.x, column)
        style = "-o" if len(xs) < 3 else "-"  # a run of one or two points stays visible
        ax.plot(xs, ys, style, color=f"C{i % 10}", label=column, lw=1.4)
    ax.set_title(spec.title, fontsize=10)
    ax.set_xlabel(spec.x_label)
    ax.set_ylabel(spec.y_label)
    ax.grid(alpha=0.3)
    if len(spec.series) > 1:
        ax.legend(fontsize=7)
    return missing


def render_all(root: str | Path = ".", out: str | Path = "docs/img") -> dict[str, Any]:
    """One PNG per plot of ``root/dvc.yaml`` and ``plots.png`` with all of them; returns what was written
    and what was skipped (a plot none of whose files exists)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root, out = Path(root), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written, skipped = [], {}
    drawable = []
    for spec in plot_specs(root):
        fig, ax = plt.subplots(figsize=(6, 3.6), dpi=110)
        missing = _draw(ax, spec, root)
        if len(missing) == len({f for f, _ in spec.series}):
            skipped[spec.name] = missing
            plt.close(fig)
            continue
        fig.tight_layout()
        fig.savefig(out / f"{spec.name}.png")
        plt.close(fig)
        written.append(str(out / f"{spec.name}.png"))
        drawable.append(spec)
    if drawable:
        cols = 2 if len(drawable) > 1 else 1
        rows = math.ceil(len(drawable) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.4 * rows), dpi=100, squeeze=False)
        for ax, spec in zip(axes.flat, drawable, strict=False):
            _draw(ax, spec, root)
        for ax in list(axes.flat)[len(drawable) :]:
            ax.axis("off")
        fig.tight_layout()
        fig.savefig(out / "plots.png")
        plt.close(fig)
        written.append(str(out / "plots.png"))
    for render, source in ((render_funnel, FUNNEL), (render_train_eval, TRAIN_EVAL)):
        made = render(root, out)
        if made:
            written.append(str(made))
        else:
            skipped[Path(source).stem] = [source]
    return {"written": written, "skipped": skipped}


FUNNEL = "metrics/funnel.json"
TRAIN_EVAL = "metrics/train_eval.json"


def funnel_steps(data: dict[str, Any], profile: str = "default") -> list[tuple[str, int, str, int | None]]:
    """(step, count, unit, the paper's count) of ``metrics/funnel.json``'s profile, in pipeline order."""
    block = data.get(profile) or next(iter(data.values()), {})
    return [(s["step"], int(s["count"]), s.get("unit", ""), s.get("paper")) for s in block.get("steps", [])]


def render_funnel(root: Path, out: Path) -> Path | None:
    """A horizontal bar per funnel step (the count, its unit, the paper's count beside it); None without
    the file."""
    import matplotlib.pyplot as plt

    path = root / FUNNEL
    if not path.is_file():
        return None
    steps = funnel_steps(json.loads(path.read_text()))
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(steps) + 1.2), dpi=110)
    ys = range(len(steps))[::-1]
    ax.barh(list(ys), [c for _, c, _, _ in steps], color="C0", label="this run (default profile)")
    papers = [(y, p) for y, (_, _, _, p) in zip(ys, steps, strict=True) if p]
    if papers:
        ax.scatter([p for _, p in papers], [y for y, _ in papers], color="C3", marker="|", s=300, label="paper")
    for y, (_, c, unit, _) in zip(ys, steps, strict=True):
        ax.text(c, y, f" {c:,} {unit}", va="center", fontsize=8)
    ax.set_yticks(list(ys), [s for s, _, _, _ in steps])
    ax.set_xscale("log")
    top = max([c for _, c, _, _ in steps] + [p for _, p in papers] + [1])
    ax.set_xlim(right=top * 6)  # room for the labels
    ax.set_xlabel("items kept (log scale)")
    ax.set_title("Data funnel: what each step keeps")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(out / "funnel.png")
    plt.close(fig)
    return out / "funnel.png"


def render_train_eval(root: Path, out: Path) -> Path | None:
    """Held-out reward per set and phase (greedy and sampled), each bar with its 95% interval; None without
    the file."""
    import matplotlib.pyplot as plt

    path = root / TRAIN_EVAL
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    phases = [p for p in ("before_sft", "after_sft", "after_grpo") if isinstance(data.get(p), dict)]
    sets = [s for s in ("shape_disjoint", "in_distribution", "leetcode", "synth") if any(s in data[p] for p in phases)]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), dpi=110, sharey=False)
    for ax, (prefix, what) in zip(axes, (("", "greedy"), ("sampled_", "sampled")), strict=True):
        width = 0.8 / max(len(phases), 1)
        for j, phase in enumerate(phases):
            xs, ys, lo, hi = [], [], [], []
            for i, s in enumerate(sets):
                row = data[phase].get(s) or {}
                if prefix + "reward" in row:
                    v = row[prefix + "reward"]
                    xs.append(i + (j - (len(phases) - 1) / 2) * width)
                    ys.append(v)
                    lo.append(v - row.get(prefix + "reward_ci_low", v))
                    hi.append(row.get(prefix + "reward_ci_high", v) - v)
            if xs:
                ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, color=f"C{j}", label=phase.replace("_", " "))
        ax.set_xticks(range(len(sets)), [s.replace("_", " ") for s in sets])
        ax.set_ylabel("mean CRM reward (0 to 4)")
        ax.set_title(f"Held-out reward, {what} answers (95% interval)")
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "train_eval.png")
    plt.close(fig)
    return out / "train_eval.png"
