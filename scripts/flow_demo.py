"""Kill and resume the real pipeline as a Prefect flow, watched through a Prefect server's API.

    python scripts/flow_demo.py --root . --kill-at sft --out flow_demo.json

1. starts ``prefect server start`` on 127.0.0.1 (its own ``PREFECT_HOME``);
2. runs ``python -m flows.pipeline`` in ROOT and, once stage KILL_AT's command has been running
   for ``--kill-after`` seconds, SIGKILLs the flow's whole process group (flow, dvc, the stages);
3. checks with ``dvc status`` that every stage recorded in ``dvc.lock`` before the kill is intact;
4. runs the flow again to the end;
5. prints and writes what the server's API shows (both flow runs, every task run of the second
   with its state and attempts) and what MLflow shows (the second flow's parent run and one child
   run per stage, with their params, metrics and artifacts).

This is evidence for docs/operations.md, not a test: on the embedded default it takes about as
long as ``dvc repro`` itself. ``tests/ops`` checks the same mechanics on toy projects.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lock_entries(root: Path) -> dict[str, str]:
    """Stage name -> its ``dvc.lock`` entry as text (to see which entries a run wrote)."""
    lock = root / "dvc.lock"
    stages = (yaml.safe_load(lock.read_text()) or {}).get("stages", {}) if lock.exists() else {}
    return {k: json.dumps(v, sort_keys=True) for k, v in stages.items()}


def _flow(root: Path, env: dict[str, str], summary: Path, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "flows.pipeline", "--summary", str(summary)]
    with log.open("w") as fh:
        return subprocess.Popen(cmd, cwd=root, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def _post(api: str, path: str, body: dict) -> list[dict]:
    return httpx.post(f"{api}{path}", json=body, timeout=30).json()


def _wait_healthy(api: str, deadline_s: float = 600) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if httpx.get(f"{api}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise SystemExit(f"prefect server at {api} not healthy after {deadline_s} s")


def _kill_when_running(proc: subprocess.Popen, log: Path, stage: str, after_s: float) -> dict:
    """SIGKILL the flow's process group once DVC has run ``stage``'s command for ``after_s`` seconds.

    (The log, not the task state: a GPU stage's task is RUNNING while it waits for the slot.)
    """
    seen, marker = None, f"Running stage '{stage}'"
    while proc.poll() is None:
        if seen is None and marker in log.read_text(errors="replace"):
            seen = time.monotonic()
        if seen is not None and time.monotonic() - seen >= after_s:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            ran = round(time.monotonic() - seen, 1)
            _wait_group_gone(proc.pid)  # until then DVC sees the killed repro as alive and the outputs busy
            return {"killed": True, "stage_running_s": ran}
        time.sleep(1)
    return {"killed": False, "exit": proc.returncode}


def _wait_group_gone(pgid: int, deadline_s: float = 120) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    raise SystemExit(f"processes of group {pgid} still exist {deadline_s} s after SIGKILL")


def _mlflow_view(root: Path, parent_id: str) -> dict:
    sys.path.insert(0, str(root))
    import mlflow

    from codethinker.tracking import tracking_uri

    client = mlflow.MlflowClient(tracking_uri(root))
    parent = client.get_run(parent_id)
    children = client.search_runs(
        [parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent_id}'", max_results=1000
    )
    return {
        "parent": {"id": parent_id, "name": parent.info.run_name, "status": parent.info.status},
        "children": {
            c.info.run_name: {
                "status": c.info.status,
                "params": len(c.data.params),
                "metrics": len(c.data.metrics),
                "artifacts": sorted(a.path for a in client.list_artifacts(c.info.run_id)),
            }
            for c in children
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=".", help="the project to run (a clone: the flow writes its outputs)")
    ap.add_argument("--kill-at", default="sft", help="SIGKILL the flow while this stage runs")
    ap.add_argument("--kill-after", type=float, default=30.0, help="seconds the stage runs before the kill")
    ap.add_argument("--out", default="flow_demo.json", help="evidence JSON")
    args = ap.parse_args()
    root = Path(args.root).resolve()
    home, port = Path(tempfile.mkdtemp(prefix="prefect-demo-")), _free_port()
    api = f"http://127.0.0.1:{port}/api"
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PREFECT_HOME": str(home), "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    server_log = (home / "server.log").open("w")
    server = subprocess.Popen(
        [f"{bindir}/prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=server_log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    evidence: dict = {"root": str(root), "api": api, "kill_at": args.kill_at, "logs": str(home)}
    try:
        _wait_healthy(api)
        env["PREFECT_API_URL"] = api
        t0, before = time.monotonic(), _lock_entries(root)
        first = _flow(root, env, home / "summary1.json", home / "flow1.log")
        evidence["kill"] = _kill_when_running(first, home / "flow1.log", args.kill_at, args.kill_after)
        evidence["kill"]["after_s"] = round(time.monotonic() - t0, 1)
        after = _lock_entries(root)
        evidence["locked_by_killed_flow"] = written = sorted(k for k, v in after.items() if before.get(k) != v)
        status = subprocess.run(["dvc", "status", "--json"], cwd=root, env=env, capture_output=True, text=True)
        if status.returncode != 0:
            raise SystemExit(f"dvc status failed after the kill ({status.returncode}): {status.stderr[-2000:]}")
        stale = set(json.loads(status.stdout))
        evidence["stale_after_kill"] = sorted(stale)
        evidence["locked_but_stale_after_kill"] = sorted(stale & set(written))  # [] = nothing finished was lost
        t1 = time.monotonic()
        second = _flow(root, env, home / "summary2.json", home / "flow2.log")
        evidence["resume_exit"], evidence["resume_s"] = second.wait(), round(time.monotonic() - t1, 1)
        summary = json.loads((home / "summary2.json").read_text())
        final = subprocess.run(["dvc", "status", "--json"], cwd=root, env=env, capture_output=True, text=True)
        evidence["stale_after_resume"] = sorted(json.loads(final.stdout)) if final.returncode == 0 else final.stderr
        evidence["resume_stages"] = {
            s["stage"]: (s["state"], s.get("status"), s.get("seconds")) for s in summary["stages"]
        }
        flows = _post(api, "/flow_runs/filter", {"sort": "START_TIME_ASC"})
        evidence["flow_runs"] = [(f["name"], f["state_type"]) for f in flows]
        tasks = _post(api, "/task_runs/filter", {"flow_runs": {"id": {"any_": [summary["flow_run_id"]]}}})
        evidence["task_runs"] = {t["name"]: (t["state_type"], t["run_count"]) for t in tasks}
        evidence["mlflow"] = _mlflow_view(root, summary["mlflow_parent_run_id"])
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    Path(args.out).write_text(json.dumps(evidence, indent=1))
    print(json.dumps(evidence, indent=1))


if __name__ == "__main__":
    main()
