"""Metrics files that DVC can load: ``dvc metrics show`` on the keys the stages write, for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codethinker.evaluation.generalize import status_counts

DVC = Path(sys.executable).parent / "dvc"
pytestmark = pytest.mark.skipif(not DVC.exists(), reason="dvc is not installed in this venv")


def _show(tmp_path: Path, metrics: dict) -> str:
    env = dict(os.environ, DVC_NO_ANALYTICS="1")
    run = lambda *a: subprocess.run(a, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # noqa: E731
    run("git", "init", "-q")
    run(str(DVC), "init", "-q")
    (tmp_path / "m.json").write_text(json.dumps(metrics))
    (tmp_path / "dvc.yaml").write_text("metrics:\n  - m.json\n")
    res = run(str(DVC), "metrics", "show")
    return res.stdout + res.stderr


def test_a_key_named_error_is_what_dvc_fails_to_load(tmp_path):
    assert "failed to load" in _show(tmp_path, {"statuses": {"pass": 1, "error": 2}})


def test_the_status_counts_of_a_benchmark_load(tmp_path):
    out = _show(tmp_path, {"statuses": status_counts(["pass", "error", "error", "timeout"])})
    assert "failed to load" not in out and "statuses.errored" in out
