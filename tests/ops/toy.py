"""A tiny real DVC project for the ops tests: stages that track to MLflow and write atomically.

Each stage runs ``toystage.py NAME``: it appends a line to ``runs.log`` (not a DVC output, so
the tests can count how often a stage really ran), reads its upstream outputs, optionally fails
once (marker file) or sleeps, then writes ``out/NAME.json`` (temp file + rename) and
``metrics/NAME.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]

STAGE_SCRIPT = """\
import json, os, sys, time
from pathlib import Path

from codethinker.params import load_section
from codethinker.ops.stage import stage_run

name = sys.argv[1]
p = load_section(name)


def log(event):
    with open("runs.log", "a") as fh:
        fh.write(f"{name} {event} {time.time():.3f} {os.getpid()}\\n")


log("start")
with stage_run(name, p) as run:
    inputs = [json.loads(Path(d).read_text()) for d in p.get("inputs", [])]
    total = sum(i["value"] for i in inputs) + int(p.get("add", 1))
    marker = Path(f".failed-once-{name}")
    if p.get("fail_once") and not marker.exists():
        marker.write_text("x")
        log("end")
        sys.exit(f"{name}: failing on purpose (first attempt)")
    if p.get("sleep_s"):
        log("sleeping")
        time.sleep(float(p["sleep_s"]))
    if p.get("wait_for_file"):  # a stage that runs until the test lets it finish
        log("sleeping")
        while not Path(p["wait_for_file"]).exists():
            time.sleep(0.2)
    for step in range(3):
        run.log_metrics({"loss": 1.0 / (step + 1)}, step=step)
    out = Path(f"out/{name}.json")
    out.parent.mkdir(exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"value": total, "stage": name}))
    os.replace(tmp, out)
    Path("metrics").mkdir(exist_ok=True)
    Path(f"metrics/{name}.json").write_text(json.dumps(
        {"in": len(inputs), "kept": total, "dropped": {"too_short": 1, "bad input": 0},
         **p.get("metrics_extra", {})}))
log("end")
print(f"{name}: value {total}")
"""


def make_toy(
    root: Path, stages: dict[str, dict], params_extra: dict | None = None, python: str = sys.executable
) -> Path:
    """``stages``: name -> {"deps": [upstream names], "params": {...}, "meta": {...}} in DAG order."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "toystage.py").write_text(STAGE_SCRIPT)
    params: dict = {"base": {"seed": 0}}
    dvc: dict = {"stages": {}}
    for name, spec in stages.items():
        ups = spec.get("deps", [])
        params[name] = {"inputs": [f"out/{u}.json" for u in ups], "add": 1, **spec.get("params", {})}
        dvc["stages"][name] = {
            "cmd": f"{python} toystage.py {name}",
            "deps": ["toystage.py", *[f"out/{u}.json" for u in ups]],
            "params": [name],
            "outs": [f"out/{name}.json"],
            "metrics": [{f"metrics/{name}.json": {"cache": False}}],
        }
        if spec.get("meta"):
            dvc["stages"][name]["meta"] = spec["meta"]
    params.update(params_extra or {})
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "dvc.yaml").write_text(yaml.safe_dump(dvc, sort_keys=False))
    env = toy_env(root)
    subprocess.run([python, "-m", "dvc", "init", "--no-scm", "-q"], cwd=root, env=env, check=True)
    subprocess.run([python, "-m", "dvc", "config", "core.analytics", "false"], cwd=root, env=env, check=True)
    return root


def toy_env(root: Path, **extra: str) -> dict[str, str]:
    """Environment for flows and dvc on a toy project: tracking on, local stores in the toy root."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PREFECT_", "CODETHINKER_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        PREFECT_HOME=str(root / ".prefect-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="300",
        PREFECT_LOGGING_LEVEL="INFO",
        DO_NOT_TRACK="1",
        DVC_NO_ANALYTICS="1",
        CODETHINKER_TRACKING="on",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def run_flow(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 900) -> tuple[int, str, dict]:
    """``python -m flows.pipeline --root root ARGS``: (exit code, output, summary JSON or {})."""
    summary = root / "summary.json"
    summary.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "flows.pipeline", "--root", str(root), "--summary", str(summary), *args],
        cwd=ROOT,
        env=env or toy_env(root),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    data = json.loads(summary.read_text()) if summary.is_file() else {}
    return proc.returncode, proc.stdout + proc.stderr, data


def runs_log(root: Path, event: str = "start") -> list[str]:
    """Stage names in the order they logged ``event`` (start, sleeping, end)."""
    p = root / "runs.log"
    lines = [line.split() for line in p.read_text().splitlines()] if p.is_file() else []
    return [f[0] for f in lines if f[1] == event]


def intervals(root: Path) -> dict[str, list[tuple[float, float]]]:
    """name -> [(start, end)] of each run of the stage's script (end = inf: it never ended)."""
    out: dict[str, list[tuple[float, float]]] = {}
    opened: dict[str, float] = {}
    for f in [line.split() for line in (root / "runs.log").read_text().splitlines()]:
        if f[1] == "start":
            if f[0] in opened:
                out.setdefault(f[0], []).append((opened[f[0]], float("inf")))
            opened[f[0]] = float(f[2])
        elif f[1] == "end":
            out.setdefault(f[0], []).append((opened.pop(f[0]), float(f[2])))
    for name, t in opened.items():
        out.setdefault(name, []).append((t, float("inf")))
    return out
