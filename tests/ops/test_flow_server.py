"""The flow against a real ``prefect server start`` on 127.0.0.1: the run is visible through its API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.ops.toy import make_toy, run_flow, toy_env

pytestmark = pytest.mark.slow


def _prefect_exe() -> str:
    return str(Path(sys.executable).parent / "prefect")


def _wait_healthy(api: str, server: subprocess.Popen, log: Path, deadline_s: float = 600) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if server.poll() is not None:
            pytest.fail(f"prefect server exited {server.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{api}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    pytest.fail(f"prefect server not healthy after {deadline_s} s:\n{log.read_text()[-4000:]}")


def test_flow_run_and_task_runs_visible_through_the_server_api(tmp_path: Path, free_port: int) -> None:
    root = make_toy(
        tmp_path / "toy",
        {"prep": {}, "gpu": {"deps": ["prep"], "params": {"fail_once": True}}},
        {"flow": {"gpu_stages": ["gpu"], "retries": 1, "retry_delay_s": 0}},
    )
    home = tmp_path / "prefect-server-home"
    log = tmp_path / "server.log"
    api = f"http://127.0.0.1:{free_port}/api"
    with log.open("w") as fh:
        server = subprocess.Popen(
            [_prefect_exe(), "server", "start", "--host", "127.0.0.1", "--port", str(free_port)],
            env=toy_env(root, PREFECT_HOME=str(home)),
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_healthy(api, server, log)
        rc, out, summary = run_flow(root, env=toy_env(root, PREFECT_HOME=str(home), PREFECT_API_URL=api))
        assert rc == 0, out[-6000:]
        assert "Starting temporary server" not in out  # it used the real server
        fid = summary["flow_run_id"]

        flow_run = httpx.get(f"{api}/flow_runs/{fid}", timeout=30).json()
        assert flow_run["state_type"] == "COMPLETED"
        task_runs = httpx.post(
            f"{api}/task_runs/filter", json={"flow_runs": {"id": {"any_": [fid]}}}, timeout=30
        ).json()
        states = {t["name"]: (t["state_type"], t["run_count"], sorted(t["tags"])) for t in task_runs}
        assert states == {
            "prep": ("COMPLETED", 1, ["dvc"]),
            "gpu": ("COMPLETED", 2, ["dvc", "gpu"]),  # failed once, retried
        }
        history = httpx.get(
            f"{api}/flow_runs/{fid}/graph-v2", timeout=30
        ).json()  # the DAG the UI draws: gpu waits for prep
        nodes = {n[1]["label"]: n[1] for n in history["nodes"]}
        assert {p["id"] for p in nodes["gpu"]["parents"]} == {nodes["prep"]["id"]}
        artifacts = httpx.post(
            f"{api}/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [fid]}}}, timeout=30
        ).json()
        keys = {a["key"] for a in artifacts}
        assert {"funnel", "pipeline-summary", "stage-gpu", "stage-prep"} <= keys
        funnel = next(a for a in artifacts if a["key"] == "funnel")
        assert funnel["type"] == "table" and "kept" in json.dumps(funnel["data"])
        limit = httpx.get(f"{api}/v2/concurrency_limits/codethinker-gpu", timeout=30).json()
        assert (limit["limit"], limit["active_slots"]) == (1, 0)
        (tmp_path / "evidence.json").write_text(
            json.dumps({"flow_run": flow_run["state_type"], "task_runs": states, "artifacts": sorted(keys)}, indent=1)
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
