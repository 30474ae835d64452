"""Traced CRUXEval-O and REval-FO from the mirror, once per session (a few seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codethinker.evaluation.benchmarks import TracedBenchmark, prepare


@pytest.fixture(scope="session")
def traced(data_mirror: Path) -> dict[str, TracedBenchmark]:
    return {name: prepare(name, data_mirror, download=False) for name in ("cruxeval", "reval")}
