"""Metric logging of the trainers (SFT, GRPO's local backend, the reward model): each log to MLflow and,
one row per step, to the stage's plot CSV. Imports transformers: the trainers import it when they train."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from codethinker.tracking import metric_group

__all__ = ["MetricsCallback", "quiet_progress"]


class MetricsCallback(TrainerCallback):
    """Send each training log to MLflow (through a StageRun) and, one row per step, to a CSV file.

    ``extra()`` returns more metrics to merge into each log (GRPO's per-step reward statistics). MLflow gets
    them under their group's prefix (:func:`codethinker.tracking.metric_group`: ``train/loss``,
    ``rollout/completions/mean_length``, ``reward/rewards/crm/mean``), less the keys starting with one of
    ``drop``; the CSV keeps the plot's column names.
    When a run resumes, CSV rows past the resumed step are dropped, so a killed-and-restarted run
    leaves no duplicate rows.
    """

    def __init__(
        self,
        run: Any = None,
        csv_path: Path | None = None,
        extra: Callable[[], dict[str, float]] | None = None,
        columns: list[str] | None = None,
        drop: tuple[str, ...] = (),
    ):
        self.run, self.csv_path, self.extra, self.columns, self.drop = run, csv_path, extra, columns, drop
        self.history: list[dict[str, float]] = []

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.csv_path and self.csv_path.is_file():
            with open(self.csv_path) as fh:
                rows = [r for r in csv.DictReader(fh) if int(float(r["step"])) <= state.global_step]
            self._write(rows, mode="w")

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any) -> None:
        logs = dict(logs or {})
        if self.extra and "train_loss" not in logs:
            logs.update(self.extra())
        numbers = {k: float(v) for k, v in logs.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        clean = {k.replace("/", "."): v for k, v in numbers.items()}  # the plot CSV's column names
        if self.run is not None:  # MLflow: grouped by prefix (train/, rollout/, reward/), without the dropped keys
            grouped = {metric_group(k): v for k, v in numbers.items() if not k.startswith(self.drop)}
            self.run.log_metrics(grouped, step=state.global_step)
        if "train_loss" in logs:  # the end-of-training summary is not a step
            return
        row = {"step": state.global_step, **clean}
        self.history.append(row)
        if self.csv_path:
            self._write([row], mode="a")

    def _write(self, rows: list[dict], mode: str) -> None:
        assert self.csv_path is not None
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        cols = self.columns or sorted({k for r in rows for k in r} - {"step"})
        new = mode == "w" or not self.csv_path.is_file() or self.csv_path.stat().st_size == 0
        with open(self.csv_path, mode, newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=["step", *cols], extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerows(rows)


def quiet_progress(trainer: Any) -> Any:
    """``trainer`` with its progress bar kept and the per-step metrics dict it prints under the bar
    dropped (the curves go to MLflow and the plot CSV); left as it is when ``CODETHINKER_LOG`` asks for
    the libraries' own lines."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from codethinker.logs import verbose

    if verbose():
        return trainer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Writing model shards", once per save: the trainer's bar stays

    class _BarOnly(ProgressCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            return None

    had_bar = trainer.pop_callback(ProgressCallback) is not None
    trainer.pop_callback(PrinterCallback)
    if had_bar:
        trainer.add_callback(_BarOnly())
    return trainer
