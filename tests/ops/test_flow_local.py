"""The Prefect flow in local mode (ephemeral API, no server): real Prefect, real DVC, real MLflow."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.ops.toy import intervals, make_toy, run_flow, runs_log

pytestmark = pytest.mark.slow

STAGES = {
    "prep": {},
    "gpu_a": {"deps": ["prep"], "params": {"fail_once": True}},  # fails on its first attempt
    "gpu_b": {"deps": ["prep"]},
    "report": {"deps": ["gpu_a", "gpu_b"]},
}
FLOW = {"flow": {"gpu_stages": ["gpu_a", "gpu_b"], "retries": 2, "retry_delay_s": 0}}


def test_flow_retries_a_flaky_gpu_stage_one_gpu_stage_at_a_time(tmp_path: Path, empty_mlflow_db: Path) -> None:
    from mlflow.tracking import MlflowClient

    root = make_toy(tmp_path / "toy", STAGES, FLOW)
    shutil.copy(empty_mlflow_db, root / "mlflow.db")
    rc, out, summary = run_flow(root)
    assert rc == 0, out[-6000:]

    states = {s["stage"]: s for s in summary["stages"]}
    assert list(states) == ["prep", "gpu_a", "gpu_b", "report"]
    assert all(s["state"] == "COMPLETED" and s["status"] == "ran" for s in states.values())
    assert states["gpu_a"]["attempts"] == 2 and states["gpu_b"]["attempts"] == 1
    assert states["gpu_a"]["gpu"] and not states["prep"]["gpu"] and not states["prep"]["retry"]
    assert runs_log(root).count("gpu_a") == 2
    assert (root / "out/report.json").read_text() == '{"value": 5, "stage": "report"}'  # (1+1)+(1+1)+1

    # the GPU limit: no attempt of gpu_a overlapped gpu_b
    spans = intervals(root)
    for a0, a1 in spans["gpu_a"]:
        for b0, b1 in spans["gpu_b"]:
            assert a1 <= b0 or b1 <= a0, f"GPU stages overlapped: {spans}"

    # MLflow: one parent for the flow run, every stage (and the failed attempt) under it
    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("codethinker")
    runs = client.search_runs([exp.experiment_id])
    parent = client.get_run(summary["mlflow_parent_run_id"])
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["prefect.flow_run_id"] == summary["flow_run_id"]
    assert parent.data.metrics["report.kept"] == 5  # the funnel, on the parent
    assert {f.path for f in client.list_artifacts(parent.info.run_id)} >= {"params.yaml", "dvc.lock"}
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted((r.data.tags["mlflow.runName"], r.info.status) for r in children) == [
        ("gpu_a", "FAILED"),
        ("gpu_a", "FINISHED"),
        ("gpu_b", "FINISHED"),
        ("prep", "FINISHED"),
        ("report", "FINISHED"),
    ]
    assert len(runs) == 6  # nothing outside the parent

    # an override through the flow: only the stage whose params changed (and what follows) reruns, and
    # params.yaml is as it was afterwards (a deployment's parameters never rewrite the checkout)
    before = (root / "params.yaml").read_bytes()
    rc, out, summary = run_flow(root, "-S", "gpu_b.add=10")
    assert rc == 0, out[-6000:]
    assert (root / "params.yaml").read_bytes() == before
    status = {s["stage"]: s["status"] for s in summary["stages"]}
    assert status == {"prep": "skipped", "gpu_a": "skipped", "gpu_b": "ran", "report": "ran"}
    assert summary["overrides"] == ["gpu_b.add=10"]
    assert runs_log(root).count("prep") == 1
    assert (root / "out/report.json").read_text() == '{"value": 14, "stage": "report"}'
    # kept when asked: the stages ran with these values already, so nothing reruns
    rc, out, summary = run_flow(root, "-S", "gpu_b.add=10", "--keep-overrides")
    assert rc == 0, out[-6000:]
    assert yaml.safe_load((root / "params.yaml").read_text())["gpu_b"]["add"] == 10
    assert {s["status"] for s in summary["stages"]} == {"skipped"}


def test_failing_stage_fails_the_flow_and_skips_downstream(tmp_path: Path) -> None:
    root = make_toy(tmp_path / "toy", {"bad": {"params": {"fail_once": True}}, "after": {"deps": ["bad"]}})
    rc, out, summary = run_flow(root)  # `bad` is no GPU/LLM stage: no retries
    assert rc == 1, out[-6000:]
    states = {s["stage"]: s["state"] for s in summary["stages"]}
    assert states["bad"] == "FAILED" and states["after"] != "COMPLETED"
    assert "after" not in runs_log(root)
    assert "exited" in next(s for s in summary["stages"] if s["stage"] == "bad")["message"]
