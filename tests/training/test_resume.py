"""A stage killed with SIGKILL and started again resumes from its last checkpoint: it loses only
the unfinished step (each step appears once in the logs, the total is the configured one)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from codethinker.ops.dvcfile import stage_argv

from .tinydata import write_grpo_parquet, write_sft_jsonl

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _arg(stage: str, flag: str) -> str:
    """The value of ``flag`` in ``stage``'s cmd in dvc.yaml."""
    argv = stage_argv(stage, ROOT)
    return argv[argv.index(flag) + 1]


def _project(tmp_path: Path, tiny_model: Path) -> Path:
    write_sft_jsonl(tmp_path / _arg("sft", "--data"), repeat=2)
    write_grpo_parquet(tmp_path / _arg("grpo", "--data"))
    lora = {"r": 4, "alpha": 8}
    params = {
        "base": {"profile": "default", "seed": 0},
        "model": {"base": str(tiny_model)},
        "sft": {
            "epochs": 1,
            "max_steps": 4,
            "max_samples": 8,
            "max_length": 1024,
            "batch_size": 1,
            "grad_accum": 1,
            "save_steps": 1,
            "learning_rate": 1e-3,
            "lora": lora,
        },
        "grpo": {
            "backend": "local",
            "init": str(tiny_model),
            "max_steps": 4,
            "prompts_per_step": 1,
            "micro_batch": 4,
            "learning_rate": 1e-5,
            "save_steps": 1,
            "lora": {**lora, "dropout": 0.05},
            "rollout_engine": "hf",
            "rollout": {"n_regular": 2, "n_dbs": 2, "max_completion_tokens": 8},
        },
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    return tmp_path


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CODETHINKER_TRACKING": "off",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def _last_step(ck: Path) -> int:
    steps = [int(d.name.split("-")[1]) for d in ck.glob("checkpoint-*") if (d / "trainer_state.json").is_file()]
    return max(steps, default=0)


@pytest.mark.parametrize("stage", ["sft", "grpo"])
def test_sigkill_then_restart_resumes_from_the_last_checkpoint(stage, tmp_path, tiny_model):
    proj = _project(tmp_path, tiny_model)
    out = proj / _arg(stage, "--out")
    ck = out / "checkpoints"
    cmd = [sys.executable, "-m", f"stages.{stage}", *stage_argv(stage, ROOT)]
    with open(proj / "first.log", "wb") as log:
        proc = subprocess.Popen(cmd, cwd=proj, env=_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 1200
    while _last_step(ck) < 1:
        assert proc.poll() is None, (proj / "first.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "no checkpoint in time"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = _last_step(ck)
    assert killed_at >= 1
    done = subprocess.run(cmd, cwd=proj, env=_env(), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    metrics = json.loads((proj / _arg(stage, "--metrics")).read_text())
    assert metrics["steps"] == 4
    if killed_at < 4:
        assert metrics["resumed_from"].endswith(f"checkpoint-{killed_at}")
    state = json.loads((ck / "checkpoint-4" / "trainer_state.json").read_text())
    logged = [h["step"] for h in state["log_history"] if "loss" in h]
    assert logged == [1, 2, 3, 4]
    table = out / "train_log.csv" if stage == "sft" else proj / _arg(stage, "--plot")
    with open(table) as fh:
        assert [int(r["step"]) for r in csv.DictReader(fh)] == [1, 2, 3, 4]
    assert (out / "merged" / "config.json").is_file()
