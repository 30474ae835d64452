"""Plain ``dvc repro`` (no Prefect): the stages of one repro share one parent run, ended by them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.ops.toy import make_toy, toy_env

pytestmark = pytest.mark.slow


def _repro(root: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dvc", "repro"], cwd=root, env=toy_env(root), capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_one_parent_per_repro_with_a_child_per_stage(tmp_path: Path, empty_mlflow_db: Path) -> None:
    from mlflow.tracking import MlflowClient

    root = make_toy(tmp_path / "toy", {"a": {}, "b": {"deps": ["a"]}, "c": {"deps": ["b"], "params": {"add": 2}}})
    shutil.copy(empty_mlflow_db, root / "mlflow.db")
    _repro(root)

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("codethinker")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("codethinker.pipeline") == "1"]
    assert len(parents) == 1
    parent = parents[0]
    assert parent.data.tags["codethinker.kind"] == "dvc-repro"
    assert parent.info.status == "FINISHED" and parent.info.end_time
    children = {r.data.tags["mlflow.runName"]: r for r in runs if r.data.tags.get("mlflow.parentRunId")}
    assert set(children) == {"a", "b", "c"}
    for name, r in children.items():
        assert r.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert r.info.status == "FINISHED"
        assert r.data.tags["codethinker.dvc_stage"] == name
        assert {f.path for f in client.list_artifacts(r.info.run_id)} >= {"manifest.json", "metrics", "outs"}
        assert [m.step for m in client.get_metric_history(r.info.run_id, "loss")] == [0, 1, 2]
    assert children["c"].data.params["add"] == "2"
    assert children["c"].data.metrics["kept"] == 4  # a=1, b=2, c=2+2
    assert children["b"].data.params["inputs"] == "['out/a.json']"

    # a later repro that reruns only `c` gets its own parent, with only `c` under it
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["c"]["add"] = 5
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _repro(root)
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("codethinker.pipeline") == "1"]
    assert len(parents) == 2
    newer = max(parents, key=lambda r: r.info.start_time)
    under_newer = [
        r.data.tags["mlflow.runName"] for r in runs if r.data.tags.get("mlflow.parentRunId") == newer.info.run_id
    ]
    assert under_newer == ["c"]
    assert all(r.info.status == "FINISHED" for r in runs)


def test_dvc_experiments_are_parent_runs_named_after_them_with_headline_metrics_and_params(
    tmp_path: Path, empty_mlflow_db: Path
) -> None:
    """``dvc exp run -n A`` and ``-n B``: two parent runs named A and B, each with the params in effect and
    the headline numbers of its stages (here ``sft``'s last loss), side by side."""
    from mlflow.tracking import MlflowClient

    root = make_toy(tmp_path / "toy", {"sft": {"params": {"metrics_extra": {"last_loss": 0.5}}}})
    env = toy_env(root)
    run = lambda *a: subprocess.run(a, cwd=root, env=env, capture_output=True, text=True, timeout=900)  # noqa: E731
    (root / ".gitignore").write_text("mlflow.db\nruns.log\nmlruns/\n.prefect-home/\n")
    assert run("git", "init", "-q").returncode == 0
    assert run(sys.executable, "-m", "dvc", "init", "-q", "--force").returncode == 0
    run("git", "add", "-A")
    assert run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "toy").returncode == 0
    shutil.copy(empty_mlflow_db, root / "mlflow.db")
    for name, loss in (("exp-a", 0.25), ("exp-b", 0.75)):
        res = run(sys.executable, "-m", "dvc", "exp", "run", "-n", name, "-S", f"sft.metrics_extra.last_loss={loss}")
        assert res.returncode == 0, res.stdout + res.stderr

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("codethinker")
    parents = {
        r.data.tags["mlflow.runName"]: r
        for r in client.search_runs([exp.experiment_id])
        if r.data.tags.get("codethinker.pipeline") == "1"
    }
    assert set(parents) == {"exp-a", "exp-b"}
    for name, loss in (("exp-a", 0.25), ("exp-b", 0.75)):
        p = parents[name]
        assert p.data.tags["dvc.exp_name"] == name
        assert p.data.metrics["train/sft/loss_last"] == loss  # the headline, on the parent
        assert p.data.params["sft.metrics_extra.last_loss"] == str(loss)  # the params in effect
        assert p.data.params["base.seed"] == "0"
