"""The flow run's summary: the JSON a caller asked for (``--summary``), the Markdown table of stage states and
the funnel rows (every number of every stage's metrics) that the flow logs as Prefect artifacts and to the
parent MLflow run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flows.dvc_task import numbers

__all__ = ["funnel_rows", "summary_markdown", "write_summary"]


def summary_markdown(summary: dict[str, Any]) -> str:
    lines = [
        "# codethinker pipeline",
        "",
        f"- root: `{summary['root']}`",
        f"- overrides: `{summary['overrides'] or 'none'}`",
        f"- MLflow parent run: `{summary.get('mlflow_parent_run_id')}` in `{summary.get('mlflow_tracking_uri')}`"
        " (`mlflow ui --backend-store-uri <uri>`)",
        "",
        "| stage | state | dvc | attempts | seconds | gpu | llm |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in summary["stages"]:
        lines.append(
            f"| {s['stage']} | {s['state']} | {s.get('status', '')} | {s.get('attempts', '')} | "
            f"{s.get('seconds', '')} | {s['gpu']} | {s['llm']} |"
        )
    return "\n".join(lines) + "\n"


def write_summary(summary: dict[str, Any], summary_path: str | None) -> None:
    if summary_path:
        Path(summary_path).write_text(json.dumps(summary, indent=2, default=str))


def funnel_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for s in summary["stages"]:
        for path, key, value in numbers(s.get("metrics") or {}):
            rows.append({"stage": s["stage"], "file": path, "metric": key, "value": value})
    return rows
