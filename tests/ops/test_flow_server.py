"""The flow against a real ``prefect server start`` on 127.0.0.1: the run is visible through its API."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
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


@contextlib.contextmanager
def prefect_server(tmp_path: Path, port: int, root: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A real ``prefect server start`` on 127.0.0.1:``port``: (its API URL, an environment that uses it)."""
    home = tmp_path / "prefect-server-home"
    log = tmp_path / "server.log"
    api = f"http://127.0.0.1:{port}/api"
    with log.open("w") as fh:
        server = subprocess.Popen(
            [_prefect_exe(), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=toy_env(root, PREFECT_HOME=str(home)),
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_healthy(api, server, log)
        yield api, toy_env(root, PREFECT_HOME=str(home), PREFECT_API_URL=api)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_flow_run_and_task_runs_visible_through_the_server_api(tmp_path: Path, free_port: int) -> None:
    root = make_toy(
        tmp_path / "toy",
        {"prep": {}, "gpu": {"deps": ["prep"], "params": {"fail_once": True}}},
        {"flow": {"gpu_stages": ["gpu"], "retries": 1, "retry_delay_s": 0}},
    )
    with prefect_server(tmp_path, free_port, root) as (api, env):
        rc, out, summary = run_flow(root, env=env)
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


def _wait_for(what: str, get, deadline_s: float = 600):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = get()
        if value:
            return value
        time.sleep(2)
    pytest.fail(f"{what}: not within {deadline_s} s")


def test_a_served_deployment_runs_on_request_with_overrides_that_leave_params_yaml_alone(
    tmp_path: Path, free_port: int
) -> None:
    """``python -m flows.pipeline --serve --cron ... -S ...``: the deployment appears on the server with its
    schedule and parameters, a run of it (as the UI's "Quick run" makes) completes through the serving
    process with the override in effect, and params.yaml is byte for byte what it was."""
    root = make_toy(tmp_path / "toy", {"prep": {}, "report": {"deps": ["prep"]}})
    before = (root / "params.yaml").read_bytes()
    with prefect_server(tmp_path, free_port, root) as (api, env):
        serve_log = (tmp_path / "serve.log").open("w")
        served = subprocess.Popen(
            [sys.executable, "-m", "flows.pipeline", "--root", str(root), "--serve", "--name", "toy",
             "--cron", "0 3 * * *", "-S", "report.add=7", "--no-preflight"],
            cwd=Path(__file__).resolve().parents[2], env=env, stdout=serve_log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            deps = _wait_for(
                "the served deployment",
                lambda: httpx.post(f"{api}/deployments/filter", json={}, timeout=30).json(),
            )
            (dep,) = deps
            assert dep["name"] == "toy"
            assert [s["schedule"]["cron"] for s in dep["schedules"]] == ["0 3 * * *"]
            assert dep["parameters"]["overrides"] == ["report.add=7"]
            run = httpx.post(f"{api}/deployments/{dep['id']}/create_flow_run", json={}, timeout=30).json()
            state = _wait_for(
                "the deployment's flow run",
                lambda: (
                    t
                    if (t := httpx.get(f"{api}/flow_runs/{run['id']}", timeout=30).json()["state_type"])
                    in ("COMPLETED", "FAILED", "CRASHED")
                    else None
                ),
            )
            assert state == "COMPLETED", (tmp_path / "serve.log").read_text()[-6000:]
            assert json.loads((root / "out/report.json").read_text())["value"] == 8  # prep 1 + report add 7
            assert (root / "params.yaml").read_bytes() == before
        finally:
            os.killpg(served.pid, signal.SIGTERM)
            served.wait(timeout=60)
            serve_log.close()


def test_prefect_yaml_deploys_its_deployments_to_a_server(tmp_path: Path, free_port: int) -> None:
    """``prefect deploy --all`` with the project's prefect.yaml (from a copy of the files it reads): each
    deployment is on the server with its entrypoint's parameters and the example schedule, switched off."""
    import shutil

    repo = Path(__file__).resolve().parents[2]
    work = tmp_path / "checkout"
    shutil.copytree(repo / "flows", work / "flows", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(repo / "prefect.yaml", work / "prefect.yaml")
    with prefect_server(tmp_path, free_port, work) as (api, env):
        env = dict(env, PWD=str(work), PYTHONPATH=str(repo))
        run = lambda *a: subprocess.run(a, cwd=work, env=env, capture_output=True, text=True, timeout=600)  # noqa: E731
        res = run(_prefect_exe(), "work-pool", "create", "codethinker", "--type", "process")
        assert res.returncode == 0, res.stdout + res.stderr
        res = run(_prefect_exe(), "--no-prompt", "deploy", "--all")
        assert res.returncode == 0, res.stdout + res.stderr
        deps = {d["name"]: d for d in httpx.post(f"{api}/deployments/filter", json={}, timeout=30).json()}
        assert sorted(deps) == ["nightly", "seed-1"]
        nightly = deps["nightly"]
        assert [(s["schedule"]["cron"], s["active"]) for s in nightly["schedules"]] == [("0 2 * * *", False)]
        assert deps["seed-1"]["parameters"]["overrides"] == ["grpo.seed=1"]
        assert "keep_overrides" in nightly["parameter_openapi_schema"]["properties"]
        step = nightly["pull_steps"][0]["prefect.deployments.steps.set_working_directory"]
        assert step["directory"] == str(work)
