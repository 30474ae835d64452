"""Fixtures for the training tests: tiny SFT/GRPO data made from hand-written ground truths."""

from __future__ import annotations

from pathlib import Path

import pytest

from .tinydata import write_grpo_parquet, write_sft_jsonl


@pytest.fixture(scope="session")
def sft_jsonl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sft_jsonl(tmp_path_factory.mktemp("sft") / "sft.jsonl")


@pytest.fixture(scope="session")
def grpo_parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_grpo_parquet(tmp_path_factory.mktemp("grpo") / "grpo_train.parquet")
