"""Decontamination of the code-generation training problems against the evaluation sets.

Two rules, each drop counted under its reason:

* **by identity** (:func:`id_filter`): a training problem whose task_id (the LeetCode slug) or
  question_id appears in any LeetCodeDataset test split (v0.1.0, v0.2.0, v0.3.0, v0.3.1) is dropped:
  ``test_split_task_id``, else ``test_split_question_id``;
* **by similarity** (:func:`similarity_filter` of :mod:`codethinker.data.similarity`, the ``dedup``
  stage's encoder and threshold): a training problem whose reference solution is as close as the
  threshold (cosine) to a benchmark program is dropped: ``similar_to_benchmark``, also counted per
  benchmark. The benchmark programs (:func:`benchmark_programs`) are the canonical solutions of
  HumanEval, HumanEval+ (prompt + canonical body), MBPP (``code``), MBPP+ (prompt + canonical) and
  the reference solutions of the LeetCodeDataset test splits, identical texts embedded once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from codethinker.codegen.task import CodegenProblem
from codethinker.data.io import RecordError, iter_jsonl
from codethinker.data.similarity import similarity_filter

__all__ = ["benchmark_programs", "id_filter", "load_test_splits", "similar_filter"]


def load_test_splits(paths: Iterable[tuple[str, Path]]) -> list[dict[str, Any]]:
    """``{"split", "task_id", "question_id", "completion"}`` of every record of the test splits
    ``(name, path)`` (v0.3.1 keeps ``question_id`` at the top level, the others in ``meta``)."""
    out = []
    for name, path in paths:
        for i, rec in enumerate(iter_jsonl(path, {"task_id": str, "completion": str}), start=1):
            meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
            qid = rec.get("question_id", meta.get("question_id"))
            if qid is not None and type(qid) is not int:
                raise RecordError(path, i, "question_id", f"expected an int, got {type(qid).__name__}")
            out.append({"split": name, "task_id": rec["task_id"], "question_id": qid, "completion": rec["completion"]})
    return out


def id_filter(
    problems: Sequence[CodegenProblem], tests: Sequence[dict[str, Any]]
) -> tuple[list[CodegenProblem], dict[str, int]]:
    """``problems`` minus those whose task_id or question_id is in a test split; drops per reason."""
    slugs = {t["task_id"] for t in tests}
    qids = {t["question_id"] for t in tests if t["question_id"] is not None}
    kept, dropped = [], {"test_split_task_id": 0, "test_split_question_id": 0}
    for p in problems:
        if p.id in slugs:
            dropped["test_split_task_id"] += 1
        elif p.question_id is not None and p.question_id in qids:
            dropped["test_split_question_id"] += 1
        else:
            kept.append(p)
    return kept, dropped


def benchmark_programs(
    items: dict[str, Sequence[Any]], tests: Sequence[dict[str, Any]]
) -> tuple[list[dict[str, str]], dict[str, int]]:
    """The programs to compare with, ``{"benchmark", "id", "code"}``, identical texts once (the first
    kept), from the code-generation benchmarks' items (``name -> [Item]``,
    :func:`codethinker.evaluation.codegen.read_items`) and the test splits' records; and per benchmark
    the programs it contributed before that deduplication."""
    rows = [(name, it.id, it.reference["solution"]) for name, its in items.items() for it in its]
    rows += [(f"leetcode-{t['split']}", t["task_id"], t["completion"]) for t in tests]
    seen: set[str] = set()
    out: list[dict[str, str]] = []
    per: dict[str, int] = {}
    for bench, ident, code in rows:
        per[bench] = per.get(bench, 0) + 1
        if code not in seen:
            seen.add(code)
            out.append({"benchmark": bench, "id": str(ident), "code": code})
    return out, per


def similar_filter(
    problems: Sequence[CodegenProblem],
    programs: list[dict[str, str]],
    encode: Callable[[Sequence[str]], Any],
    threshold: float,
) -> tuple[list[CodegenProblem], list[dict[str, Any]], dict[str, Any]]:
    """``problems`` minus those whose reference is as similar as ``threshold`` to a program; each
    problem's nearest program; counts (``similar_to_benchmark``, ``by_benchmark``, the median)."""
    samples = [{"task_id": p.id, "code": p.reference} for p in problems]
    kept, nearest, counts = similarity_filter(samples, programs, encode, threshold)
    ids = {s["task_id"] for s in kept}
    return (
        [p for p in problems if p.id in ids],
        nearest,
        {
            "similar_to_benchmark": counts["functions_dropped"],
            "by_benchmark": counts["functions_dropped_by_benchmark"],
            "max_similarity_p50": counts["max_similarity_p50"],
        },
    )
