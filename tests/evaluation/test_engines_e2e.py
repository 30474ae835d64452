"""The evaluate path end to end on the tiny random model: real engines, a few samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
ROOT = Path(__file__).resolve().parents[2]


def _eval(tmp_path: Path, tiny_model: Path, data_mirror: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CODETHINKER_TRACKING": "off", "HF_HUB_OFFLINE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "codethinker.cli",
        "eval",
        "--model",
        str(tiny_model),
        "--name",
        "tiny",
        "--bench",
        "cruxeval,reval",
        "--bench",
        "LCB-O",
        "--limit",
        "3",
        "--runs",
        "2",
        "--max-tokens",
        "8",
        "--mirror",
        str(data_mirror),
        "--out",
        str(tmp_path / "out"),
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800, check=False)


def _check(tmp_path: Path, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "LiveCodeBench-O skipped" in proc.stderr  # offline: a message, not an error
    out = tmp_path / "out"
    for bench in ("cruxeval", "reval"):
        m = json.loads((out / "metrics" / f"{bench}.json").read_text())
        assert m["n_samples"] == 3 and m["runs"] == 2 and len(m["pass1_runs"]) == 2
        assert 0 < m["tokens_mean"] <= 8 and m["rcs_mean"] is not None
        rows = [json.loads(x) for x in (out / "predictions" / f"{bench}.jsonl").read_text().splitlines()]
        assert len(rows) == 6 and {r["seed"] for r in rows} == {0, 1}
        assert all(r["tokens"] <= 8 and r["finish"] in ("stop", "length") for r in rows)
    assert json.loads((out / "metrics" / "livecodebench.json").read_text())["skipped"].startswith("LiveCodeBench-O")
    assert "tiny CRUXEval-O: pass@1" in proc.stdout


@pytest.mark.vllm
def test_eval_cli_vllm_tiny_model(tmp_path, tiny_model, data_mirror):
    _check(tmp_path, _eval(tmp_path, tiny_model, data_mirror, "--eager", "--dtype", "float32"))


def test_eval_cli_hf_tiny_model(tmp_path, tiny_model, data_mirror):
    _check(tmp_path, _eval(tmp_path, tiny_model, data_mirror, "--backend", "hf"))
