"""What the ``codegen_data`` stage runs: :func:`build_problems` (``codegen_truth`` runs
:func:`codethinker.codegen.judge.check_references`).

``build_problems``: the train splits merged (a task_id in v0.1.0 and v0.2.0 keeps v0.2.0's record) ->
each record made a :class:`~codethinker.codegen.task.CodegenProblem` (a record whose entry point is
not ``Class().method``, whose tests cannot be split, or one of whose tests is in no form the judge
compares (:mod:`codethinker.codegen.checks`) is dropped with that reason) -> the id filter
against the test splits -> ``limit`` problems sampled by ``base.seed`` -> the similarity filter ->
the first ``heldout`` share of the (seeded) order held out. Every drop is counted under its reason.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from pathlib import Path
from typing import Any

from codethinker.codegen.checks import CheckError
from codethinker.codegen.decontam import benchmark_programs, id_filter, load_test_splits, similar_filter
from codethinker.codegen.task import CodegenProblem, EntryPointError, TestSplitError, make_problem
from codethinker.config.codegen import CodegenConfig
from codethinker.data.similarity import open_encoder
from codethinker.data.sources import SOURCES, SourceError, load_leetcode, resolve

__all__ = ["build_problems", "source_paths"]


def source_paths(cfg: CodegenConfig, names: list[str], prefix: str = "leetcode/") -> list[tuple[str, Path]]:
    """(name, local path) of each named source (the mirror, else its pinned download)."""
    mirror, out = cfg.base.mirror_root(), []
    for name in names:
        key = prefix + name
        if key not in SOURCES:
            raise SourceError(f"codegen: unknown source {key!r} in params.yaml; known: {', '.join(SOURCES)}")
        out.append((name, resolve(SOURCES[key], mirror, cfg.cache_dir, download=cfg.download)[0]))
    return out


def _make_all(records: list[dict[str, Any]]) -> tuple[list[CodegenProblem], dict[str, int]]:
    problems, dropped = [], {"entry_point": 0, "tests_unsplittable": 0, "tests_unjudgeable": 0}
    for rec in records:
        try:
            problems.append(make_problem(rec))
        except EntryPointError:
            dropped["entry_point"] += 1
        except TestSplitError:
            dropped["tests_unsplittable"] += 1
        except CheckError:
            dropped["tests_unjudgeable"] += 1
    return problems, dropped


def _encoder(cfg: CodegenConfig) -> Any:
    assert cfg.model is not None and cfg.batch_size is not None  # filled from dedup by the config
    return open_encoder(cfg.model, cfg.batch_size, cfg.embed_cache)


def build_problems(cfg: CodegenConfig) -> tuple[list[CodegenProblem], list[dict[str, Any]], dict[str, Any]]:
    """The problems (train and held-out), each one's nearest benchmark program, and the counts."""
    from codethinker.evaluation.codegen import read_items

    t0 = time.perf_counter()
    records, read = load_leetcode(
        [(n.removesuffix("-train"), p) for n, p in source_paths(cfg, cfg.leetcode)], extra=("test", "query")
    )
    problems, dropped = _make_all(records)
    tests = load_test_splits(source_paths(cfg, cfg.test_splits))
    problems, by_id = id_filter(problems, tests)
    dropped |= by_id
    rng = random.Random(cfg.base.seed)
    rng.shuffle(problems)
    sampled = problems[: cfg.limit] if cfg.limit is not None else problems
    items = {name: read_items(name, path) for name, path in source_paths(cfg, cfg.benchmarks, prefix="")}
    programs, per_bench = benchmark_programs(items, tests)
    assert cfg.threshold is not None
    kept, nearest, sim = similar_filter(sampled, programs, _encoder(cfg), cfg.threshold)
    dropped["similar_to_benchmark"] = sim["similar_to_benchmark"]
    n_held = math.floor(cfg.heldout * len(kept))
    out = [p if i >= n_held else dataclasses.replace(p, split="heldout") for i, p in enumerate(kept)]
    out.sort(key=lambda p: (p.question_id or 0, p.id))
    n_tests = sum(len(p.tests) for p in out)
    metrics = {
        "rows": read["rows"],
        "duplicates": read["duplicates"],
        "problems_in": read["problems"],
        "dropped": dropped,
        "not_sampled": len(problems) - len(sampled),
        "similar_by_benchmark": sim["by_benchmark"],
        "max_similarity_p50": sim["max_similarity_p50"],
        "model": cfg.model,
        "threshold": cfg.threshold,
        "benchmark_programs": per_bench,
        "benchmark_programs_unique": len(programs),
        "problems": len(out),
        "train": len(out) - n_held,
        "heldout": n_held,
        "tests": n_tests,
        "tests_per_problem": round(n_tests / len(out), 2) if out else 0.0,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    return out, nearest, metrics
