"""``codethinker repro`` / ``exp run`` on a tiny real DVC project: the command opens the parent run, passes its
id to the stages and ends it with dvc's status; a bare ``dvc repro`` gives each stage a top-level run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.ops.toy import make_toy, runs_log, toy_env

pytestmark = pytest.mark.slow


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=root, env=toy_env(root), capture_output=True, text=True, timeout=900)


def _codethinker(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run(root, sys.executable, "-m", "codethinker.cli", *args)


def _mlflow(root: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("codethinker")
    return client, (client.search_runs([exp.experiment_id], max_results=1000) if exp else [])


def _parents(runs):
    return sorted((r for r in runs if r.data.tags.get("codethinker.pipeline") == "1"), key=lambda r: r.info.start_time)


def test_one_parent_per_repro_with_a_child_per_stage(tmp_path: Path, empty_mlflow_db: Path) -> None:
    root = make_toy(tmp_path / "toy", {"a": {}, "b": {"deps": ["a"]}, "c": {"deps": ["b"], "params": {"add": 2}}})
    shutil.copy(empty_mlflow_db, root / "mlflow.db")
    proc = _codethinker(root, "repro")
    assert proc.returncode == 0, proc.stdout + proc.stderr

    client, runs = _mlflow(root)
    (parent,) = _parents(runs)
    assert f"MLflow parent run {parent.info.run_id}" in proc.stderr
    assert parent.data.tags["codethinker.kind"] == "dvc-repro"
    assert parent.data.tags["mlflow.runName"] == "dvc repro"  # no git here: no commit in the name
    assert parent.data.tags["codethinker.command"] == "dvc repro"
    assert parent.info.status == "FINISHED" and parent.info.end_time
    assert parent.data.params["c.add"] == "2" and parent.data.params["base.seed"] == "0"  # the params in effect
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

    # a bare `dvc repro` that reruns only `c`: no parent id, so `c` gets a top-level run and the
    # earlier parent is left exactly as it was (nothing found through the dvc process)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["c"]["add"] = 5
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    bare = _run(root, sys.executable, "-m", "dvc", "repro")
    assert bare.returncode == 0, bare.stdout + bare.stderr
    _, after = _mlflow(root)
    assert [p.info.run_id for p in _parents(after)] == [parent.info.run_id]
    again = client.get_run(parent.info.run_id)
    assert (again.info.status, again.info.end_time) == ("FINISHED", parent.info.end_time)
    assert again.data.metrics == parent.data.metrics
    new = [r for r in after if r.info.run_id not in {x.info.run_id for x in runs}]
    assert [r.data.tags["mlflow.runName"] for r in new] == ["c"]
    assert "mlflow.parentRunId" not in new[0].data.tags
    assert new[0].data.tags["codethinker.kind"] == "stage" and new[0].info.status == "FINISHED"
    assert new[0].data.params["add"] == "5"
    assert all(r.info.status == "FINISHED" for r in after)


def test_a_repro_that_creates_the_store_prints_no_mlflow_chatter(tmp_path: Path) -> None:
    """The parent opens before any stage: MLflow's INFO lines of creating its tables stay out of make run's log."""
    root = make_toy(tmp_path / "toy", {"a": {}})
    proc = _codethinker(root, "repro")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (root / "mlflow.db").is_file() and "INFO mlflow" not in proc.stderr, proc.stderr


def test_failing_repro_fails_its_parent_and_passes_dvc_exit_code(tmp_path: Path, empty_mlflow_db: Path) -> None:
    root = make_toy(tmp_path / "toy", {"a": {"params": {"fail_once": True}}, "b": {"deps": ["a"]}})
    shutil.copy(empty_mlflow_db, root / "mlflow.db")
    bare = _run(root, sys.executable, "-m", "dvc", "repro", "--no-such-option")
    wrapped = _codethinker(root, "repro", "--no-such-option")
    assert bare.returncode == wrapped.returncode == 254  # dvc's usage error, passed on as it is

    failed = _codethinker(root, "repro")
    assert failed.returncode == 255, failed.stdout + failed.stderr  # dvc's code for a failed stage
    assert "failed to reproduce 'a'" in failed.stderr
    passed = _codethinker(root, "repro")  # `a` fails only once
    assert passed.returncode == 0, passed.stdout + passed.stderr

    _, runs = _mlflow(root)
    usage, first, second = _parents(runs)
    assert [usage.info.status, first.info.status, second.info.status] == ["FAILED", "FAILED", "FINISHED"]
    assert usage.data.tags["codethinker.command"] == "dvc repro --no-such-option"
    under = {
        p.info.run_id: sorted(
            (r.data.tags["mlflow.runName"], r.info.status)
            for r in runs
            if r.data.tags.get("mlflow.parentRunId") == p.info.run_id
        )
        for p in (usage, first, second)
    }
    assert under[usage.info.run_id] == []
    assert under[first.info.run_id] == [("a", "FAILED")]
    assert under[second.info.run_id] == [("a", "FINISHED"), ("b", "FINISHED")]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["sigterm", "ctrl-c"])
def test_a_signal_stops_dvc_and_its_stage_and_kills_the_parent(
    sig: signal.Signals, code: int, tmp_path: Path, empty_mlflow_db: Path
) -> None:
    """SIGTERM or Ctrl-C (SIGINT) to ``codethinker repro`` reaches dvc's process group; every run ends KILLED."""
    root = make_toy(tmp_path / "toy", {"a": {}, "slow": {"deps": ["a"], "params": {"wait_for_file": "never"}}})
    shutil.copy(empty_mlflow_db, root / "mlflow.db")
    log = (tmp_path / "repro.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "codethinker.cli", "repro"],
        cwd=root,
        env=toy_env(root),
        stdout=log,
        stderr=log,
        preexec_fn=_as_from_a_terminal,
    )
    try:
        deadline = time.monotonic() + 300
        while "slow" not in runs_log(root, "sleeping"):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "repro.log").read_text()
            time.sleep(0.2)
        stage_pid = int((root / "runs.log").read_text().split()[-1])
        proc.send_signal(sig)
        assert proc.wait(timeout=120) == code
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    with pytest.raises(ProcessLookupError):  # the stage was stopped with dvc, not left behind
        os.kill(stage_pid, 0)
    _, runs = _mlflow(root)
    (parent,) = _parents(runs)
    assert parent.info.status == "KILLED"
    children = {r.data.tags["mlflow.runName"]: r.info.status for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert children == {"a": "FINISHED", "slow": "KILLED"}


def _as_from_a_terminal() -> None:
    """Ctrl-C as a terminal delivers it: a test suite started in the background (``cmd &`` in a script, nohup)
    runs with SIGINT ignored, which its children inherit, and a process that inherits an ignored SIGINT keeps
    ignoring it (Python installs no KeyboardInterrupt handler), as it should."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_dvc_experiments_are_parent_runs_named_after_them_with_headline_metrics_and_params(
    tmp_path: Path, empty_mlflow_db: Path
) -> None:
    """``codethinker exp run -n A`` and ``-n B``: two parent runs named A and B, each with the params in
    effect and the headline numbers of its stages (here ``sft``'s last loss), side by side."""
    from mlflow.tracking import MlflowClient

    root = make_toy(tmp_path / "toy", {"sft": {"params": {"metrics_extra": {"last_loss": 0.5}}}})
    (root / ".gitignore").write_text("mlflow.db\nruns.log\nmlruns/\n.prefect-home/\n")
    assert _run(root, "git", "init", "-q").returncode == 0
    assert _run(root, sys.executable, "-m", "dvc", "init", "-q", "--force").returncode == 0
    _run(root, "git", "add", "-A")
    assert _run(root, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "toy").returncode == 0
    head = _run(root, "git", "rev-parse", "HEAD").stdout.strip()
    shutil.copy(empty_mlflow_db, root / "mlflow.db")
    for name, loss in (("exp-a", 0.25), ("exp-b", 0.75)):
        res = _codethinker(root, "exp", "run", "-n", name, "-S", f"sft.metrics_extra.last_loss={loss}")
        assert res.returncode == 0, res.stdout + res.stderr

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("codethinker")
    runs = client.search_runs([exp.experiment_id])
    parents = {r.data.tags["mlflow.runName"]: r for r in _parents(runs)}
    assert set(parents) == {"exp-a", "exp-b"}
    for name, loss in (("exp-a", 0.25), ("exp-b", 0.75)):
        p = parents[name]
        assert p.info.status == "FINISHED" and p.data.tags["codethinker.kind"] == "dvc-exp"
        assert p.data.tags["dvc.exp_name"] == name
        assert p.data.tags["mlflow.source.git.commit"] == head
        assert p.data.metrics["train/sft/loss_last"] == loss  # the headline, on the parent
        assert p.data.params["sft.metrics_extra.last_loss"] == str(loss)  # the params in effect
        assert p.data.params["base.seed"] == "0"
        (child,) = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == p.info.run_id]
        assert child.data.tags["dvc.exp_name"] == name
