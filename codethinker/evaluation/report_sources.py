"""Where the report's results come from (:mod:`codethinker.evaluation.report`): the evaluate stage's
metrics files (:func:`from_metrics_dir`), the newest MLflow run per model (:func:`from_mlflow`), and
the JSON of ``dvc exp show --json`` (:func:`from_dvc_exps`), each as :class:`ModelResult` per model."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codethinker.evaluation.benchmarks import BENCHMARKS

__all__ = [
    "ModelResult",
    "dotted",
    "exp_revs",
    "exp_runs",
    "from_dvc_exps",
    "from_metrics_dir",
    "from_mlflow",
    "grpo_seed",
]


@dataclass
class ModelResult:
    name: str
    source: str
    benches: dict[str, dict[str, Any]] = field(default_factory=dict)  # bench -> metrics

    def scored(self) -> dict[str, dict[str, Any]]:
        return {b: m for b, m in self.benches.items() if not m.get("skipped") and m.get("pass1_mean") is not None}


def from_metrics_dir(root: str | os.PathLike[str] = "metrics/eval") -> dict[str, ModelResult]:
    """``<root>/<model>/<bench>.json`` files, as the evaluate stage writes them."""
    out: dict[str, ModelResult] = {}
    for path in sorted(Path(root).glob("*/*.json")):
        try:
            m = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not a metrics JSON ({exc})") from None
        model = path.parent.name
        out.setdefault(model, ModelResult(model, str(path.parent))).benches[m.get("benchmark", path.stem)] = m
    return out


_MLFLOW_KEYS = (
    "pass1_mean",
    "pass1_std",
    "pass1_strict_mean",
    "rcs_mean",
    "fmt_rate",
    "answer_rate",
    "tokens_mean",
    "n_samples",
    "untraceable",
)


def _number(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return None if text == "None" else text


def from_mlflow(uri: str | None = None, experiment: str | None = None) -> dict[str, ModelResult]:
    """The newest finished run per ``eval.model`` tag in the project's MLflow experiment."""
    import mlflow

    from codethinker.tracking import experiment_name, tracking_uri

    mlflow.set_tracking_uri(uri or tracking_uri())
    runs = mlflow.search_runs(
        experiment_names=[experiment or experiment_name()],
        filter_string="attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        output_format="list",
    )
    out: dict[str, ModelResult] = {}
    for run in runs:
        name = run.data.tags.get("eval.model")
        if not name or name in out:
            continue
        res = ModelResult(name, f"mlflow run {run.info.run_id}")
        params = run.data.params
        config = {k[7:]: _number(v) for k, v in params.items() if k.startswith("config.")}
        model = {"name": name, "format": params.get("model.format", "?")}
        for bench in BENCHMARKS:
            m = {k: run.data.metrics[f"{bench}.{k}"] for k in _MLFLOW_KEYS if f"{bench}.{k}" in run.data.metrics}
            if f"{bench}.skipped" in run.data.tags:  # checked first: autolog also logs a skipped file's numbers
                res.benches[bench] = {"benchmark": bench, "skipped": run.data.tags[f"{bench}.skipped"]}
            elif "pass1_mean" in m:
                res.benches[bench] = {"benchmark": bench, "rcs_mean": None, "config": config, "model": model, **m}
        out[name] = res
    return out


def exp_revs(data: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(name, rev)`` for the workspace, each baseline commit and each experiment of ``dvc exp show --json``."""
    for top in data:
        yield ("workspace" if top.get("rev") == "workspace" else top.get("name") or top.get("rev", "?")[:7]), top
        for exp in top.get("experiments") or []:
            if (exp.get("executor") or {}).get("state") in ("running", "queued"):
                continue  # not finished: DVC shows the workspace's params and metrics under its name
            for rev in exp.get("revs") or []:
                yield rev.get("name") or exp.get("name") or rev.get("rev", "?")[:7], rev


def exp_runs(exp_show: list[dict[str, Any]] | str, metrics_file: str) -> Iterator[tuple[str, dict, dict]]:
    """``(name, params.yaml, the data of metrics_file)`` of each rev of ``dvc exp show --json`` (the text or
    its parsed JSON); a missing part is ``{}``. The experiments come first (DVC's order: newest first), then
    the workspace and the baseline commits, so that a caller keeping the first of each setup takes an
    experiment's result over the metrics a commit carries from an older run (or a workspace mid-experiment)."""
    data = json.loads(exp_show) if isinstance(exp_show, str) else exp_show
    tops = {id(top) for top in data}
    for name, rev in sorted(exp_revs(data), key=lambda r: id(r[1]) in tops):  # stable: experiments first
        d = rev.get("data") or {}
        params = ((d.get("params") or {}).get("params.yaml") or {}).get("data") or {}
        yield name, params, ((d.get("metrics") or {}).get(metrics_file) or {}).get("data") or {}


def dotted(d: Any, key: str) -> Any:
    """``d["a"]["b"]`` for ``key`` ``"a.b"``; None where a level is missing or not a mapping.

    >>> dotted({"grpo": {"seed": 3}}, "grpo.seed"), dotted({"grpo": 1}, "grpo.seed")
    (3, None)
    """
    for part in key.split("."):
        if not isinstance(d, Mapping) or part not in d:
            return None
        d = d[part]
    return d


def grpo_seed(params: Mapping[str, Any]) -> int:
    """The seed an experiment's GRPO ran with: ``grpo.seed``, else ``base.seed`` (else 0)."""
    seed = dotted(params, "grpo.seed")
    return int(dotted(params, "base.seed") or 0) if seed is None else int(seed)


def from_dvc_exps(exp_show: list[dict[str, Any]] | str) -> dict[str, dict[str, ModelResult]]:
    """``{experiment name: {model: result}}`` from ``dvc exp show --json`` (``workspace`` included)."""
    data = json.loads(exp_show) if isinstance(exp_show, str) else exp_show
    out: dict[str, dict[str, ModelResult]] = {}

    def add(name: str, rev: dict[str, Any]) -> None:
        models: dict[str, ModelResult] = {}
        for path, entry in ((rev.get("data") or {}).get("metrics") or {}).items():
            parts = Path(path).parts
            if len(parts) >= 4 and parts[-4:-2] == ("metrics", "eval") and "data" in entry:
                m = entry["data"]
                model = parts[-2]
                models.setdefault(model, ModelResult(model, f"dvc exp {name}")).benches[Path(path).stem] = m
        if models:
            out[name] = models

    for name, rev in exp_revs(data):
        add(name, rev)
    return out
