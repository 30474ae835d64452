"""benchmarks/bench_gpu.py, the device benchmark, runs end to end on this CPU (a smoke run: the figures it
prints on a CPU are no claim): every measurement asked for is there, each a positive rate, and the ratios
(``torch.compile`` and vLLM's start are skipped here: minutes on two cores); the DBS round runs per group and
batched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.needs_shared
def test_the_device_benchmark_runs_on_a_cpu(tmp_path: Path, tokenizer_dir: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), "--shape", "micro", "--batch", "2",
           "--tokens", "60", "--steps", "2", "--warmup", "1", "--rollout-prompts", "2", "--rollout-tokens", "8",
           "--tokenizer", str(tokenizer_dir), "--json", str(out), "--skip", "compiled,vllm"]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["device"].startswith("CPU") and json.loads(res.stdout) == got  # stdout: the figures only
    assert "compiled" not in got and "vllm_tokens_per_s" not in got["rollout"]  # skipped: the slow parts on a CPU
    for part in ("bare", "sft"):
        assert got[part]["tokens_per_s"] > 0 and got[part]["peak_gib"] > 0, part
    assert 0 <= got["bare"]["padding_share"] < 1 and got["sft_vs_loop"] > 0
    assert got["rollout"]["hf_engine_tokens_per_s"] > 0 and got["hf_engine_vs_generate"] > 0
    rnd = got["rollout"]["dbs_round"]  # a DBS round: per-group calls vs one batched generate, per KV cache
    assert set(got["hf_round_batched_vs_per_group"]) == {"batched_dynamic", "batched_static"}
    assert rnd["groups"] > 1 and all(rnd["same_completions"].values())
    for name in ("per_group", "batched_dynamic", "batched_static"):
        assert rnd[f"{name}_tokens_per_s"] > 0, name
    assert rnd["runs"]["per_group"][0]["generate_calls"] == rnd["groups"]
    assert rnd["runs"]["batched_dynamic"][0]["generate_calls"] == 1
