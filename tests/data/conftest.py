"""Fixtures of the data-pipeline tests: small real samples from ../shared and stage sandboxes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def leetcode_rows(data_mirror: Path) -> list[dict]:
    """The first 150 records of LeetCodeDataset v0.2.0 train (real data)."""
    path = data_mirror / "leetcodedataset" / "LeetCodeDataset-v0.2.0-train.jsonl.gz"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            rows.append(json.loads(line))
            if len(rows) == 150:
                break
    return rows


@pytest.fixture(scope="session")
def leetcode_problems(leetcode_rows: list[dict]) -> list[dict]:
    """fetch-stage problem records made from :func:`leetcode_rows`."""
    return [
        {
            "task_id": r["task_id"],
            "version": "v0.2.0",
            "question_id": r["meta"]["question_id"],
            "difficulty": r["meta"]["difficulty"],
            "entry_point": r["entry_point"],
            "preamble": r["prompt"],
            "completion": r["completion"],
            "input_output": r["input_output"],
        }
        for r in leetcode_rows
    ]
