"""SIGKILL the flow midway, start it again: the pipeline finishes, finished stages are not redone,
no output is corrupt, and the runs the killed flow left open are closed."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ops.toy import ROOT, make_toy, run_flow, runs_log, toy_env

pytestmark = pytest.mark.slow

STAGES = {"a": {}, "slow": {"deps": ["a"], "params": {"sleep_s": 20}}, "c": {"deps": ["slow"]}}
FLOW = {"flow": {"gpu_stages": ["slow"], "retries": 0}}  # `slow` holds the GPU slot when killed


def _start_flow(root: Path, log: Path, *args: str) -> subprocess.Popen:
    with log.open("w") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "flows.pipeline", "--root", str(root), *args],
            cwd=ROOT,
            env=toy_env(root),
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, to kill it whole
        )


def _wait_for(root: Path, proc: subprocess.Popen, log: Path, stage: str, event: str, deadline_s: float = 900) -> None:
    end = time.monotonic() + deadline_s
    while stage not in runs_log(root, event):
        if proc.poll() is not None:
            pytest.fail(f"the flow ended ({proc.returncode}) before {stage} {event}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > end:
            pytest.fail(f"{stage} did not {event} within {deadline_s} s:\n{log.read_text()[-4000:]}")
        time.sleep(0.5)


def _check_finished(root: Path) -> None:
    for name, value in (("a", 1), ("slow", 2), ("c", 3)):
        assert json.loads((root / f"out/{name}.json").read_text()) == {"value": value, "stage": name}
    assert not list(root.glob("out/*.tmp"))
    status = subprocess.run(
        [sys.executable, "-m", "dvc", "status"], cwd=root, env=toy_env(root), capture_output=True, text=True
    )
    assert status.returncode == 0 and "up to date" in status.stdout, status.stdout + status.stderr


def _runs(root: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    return client.search_runs([client.get_experiment_by_name("codethinker").experiment_id])


def test_kill_the_whole_flow_then_resume(tmp_path: Path, empty_mlflow_db: Path) -> None:
    root = make_toy(tmp_path / "toy", STAGES, FLOW)
    shutil.copy(empty_mlflow_db, root / "mlflow.db")
    log = tmp_path / "first.log"
    proc = _start_flow(root, log)
    try:
        _wait_for(root, proc, log, "slow", "sleeping")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # flow, dvc and the stage: as a container stop or power loss
        proc.wait()
    assert runs_log(root, "end") == ["a"]
    assert not (root / "out/slow.json").exists()

    rc, out, summary = run_flow(root)
    assert rc == 0, out[-6000:]
    assert {s["stage"]: s["status"] for s in summary["stages"]} == {"a": "skipped", "slow": "ran", "c": "ran"}
    assert runs_log(root) == ["a", "slow", "slow", "c"]  # `a` was not redone
    assert "freed 1 slot(s) of 'codethinker-gpu'" in out  # the dead flow's GPU slot (ephemeral API)
    assert "Crashed: its process is gone" in out  # the dead flow's Prefect run is not left Running
    _check_finished(root)

    runs = _runs(root)
    parents = sorted(
        (r for r in runs if r.data.tags.get("codethinker.pipeline") == "1"), key=lambda r: r.info.start_time
    )
    assert [p.info.status for p in parents] == ["KILLED", "FINISHED"]  # the dead flow's parent was reaped
    slow_runs = sorted((r for r in runs if r.data.tags["mlflow.runName"] == "slow"), key=lambda r: r.info.start_time)
    assert [r.info.status for r in slow_runs] == ["KILLED", "FINISHED"]
    assert not [r for r in runs if r.info.status == "RUNNING"]


def test_kill_only_the_flow_process_then_resume(tmp_path: Path, empty_mlflow_db: Path) -> None:
    """`kill -9 <flow pid>`: the running stage outlives it and finishes; the new flow waits for it."""
    stages = dict(STAGES, slow={"deps": ["a"], "params": {"wait_for_file": "release-slow"}})
    root = make_toy(tmp_path / "toy", stages, FLOW)
    shutil.copy(empty_mlflow_db, root / "mlflow.db")
    log1, log2, summary_path = tmp_path / "first.log", tmp_path / "second.log", tmp_path / "summary.json"
    first = _start_flow(root, log1)
    second = None
    try:
        _wait_for(root, first, log1, "slow", "sleeping")
        os.kill(first.pid, signal.SIGKILL)  # the flow process only: its dvc and the stage go on
        first.wait()
        second = _start_flow(root, log2, "--summary", str(summary_path))
        end = time.monotonic() + 900
        while "waiting for them to exit" not in log2.read_text():  # the new flow found the stage busy
            assert second.poll() is None, log2.read_text()[-6000:]
            assert time.monotonic() < end, log2.read_text()[-6000:]
            time.sleep(0.5)
        (root / "release-slow").touch()  # now the orphaned stage may finish
        assert second.wait(timeout=900) == 0, log2.read_text()[-6000:]
    finally:
        for proc in (first, second):
            if proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # whatever is left
    summary = json.loads(summary_path.read_text())
    assert {s["stage"]: s["status"] for s in summary["stages"]} == {"a": "skipped", "slow": "skipped", "c": "ran"}
    assert runs_log(root) == ["a", "slow", "c"]  # nothing redone: the orphaned `slow` finished it
    _check_finished(root)
    assert not [r for r in _runs(root) if r.info.status == "RUNNING"]
