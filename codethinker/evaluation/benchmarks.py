"""The three output-prediction benchmarks and their ground truth (SPEC §7).

=================  ==========================================================  ===============
name               what                                                        paper's count
=================  ==========================================================  ===============
``cruxeval``       CRUXEval-O: 800 programs ``f`` with one input each           800
``reval``          REval-FO: the HumanEval-derived programs ``DREval/0..84``    651
                   with every input (function-level output prediction)
``livecodebench``  LiveCodeBench-O: the execution set ``livecodebench/          479
                   execution-v2`` (Hugging Face hub only; skipped offline)
=================  ==========================================================  ===============

CRUXEval and REval come from the local mirror (``base.mirror``) or their pinned public URLs
(:mod:`codethinker.data.sources`, sha256-checked). One id per sample: ``<task id>/<input index>``.
The truth of every sample is its ConTra flow from :func:`codethinker.contra.tracer.trace_many`
(the true output and the blocks for RCS); samples that cannot be traced are kept with the
reason and left out of the scores.

>>> reval_args("([1.0, 2.0], 0.3,)")
'[1.0, 2.0], 0.3'
>>> canonical_name("CRUXEval-O")
'cruxeval'
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from codethinker.contra.tracer import Flow
from codethinker.data.io import iter_jsonl, read_jsonl, write_jsonl
from codethinker.errors import CodethinkerError

__all__ = [
    "BENCHMARKS",
    "DISPLAY",
    "PAPER_COUNTS",
    "BenchmarkUnavailable",
    "Problem",
    "Sample",
    "TracedBenchmark",
    "attach_truth",
    "canonical_name",
    "expected_mismatches",
    "lcb_problem",
    "load_cruxeval",
    "load_livecodebench",
    "load_problems",
    "load_reval_fo",
    "load_traced",
    "prepare",
    "read_truth",
    "reval_args",
    "write_truth",
]

BENCHMARKS = ("cruxeval", "livecodebench", "reval")  # the paper's table order: CRUX-O, LCB-O, REval-FO
DISPLAY = {"cruxeval": "CRUXEval-O", "livecodebench": "LCB-O", "reval": "REval-FO"}
PAPER_COUNTS = {"cruxeval": 800, "livecodebench": 479, "reval": 651}
_ALIASES = {
    "cruxeval": "cruxeval",
    "cruxeval-o": "cruxeval",
    "crux": "cruxeval",
    "crux-o": "cruxeval",
    "reval": "reval",
    "reval-fo": "reval",
    "livecodebench": "livecodebench",
    "livecodebench-o": "livecodebench",
    "lcb": "livecodebench",
    "lcb-o": "livecodebench",
}
LIVECODEBENCH_REPO = "livecodebench/execution-v2"

# LiveCodeBench's harness runs every program after its BASE_IMPORTS; the stdlib lines a program
# needs are put above it here (numpy/pandas are left out: no LCB-O program uses them).
_LCB_IMPORTS = (
    "from typing import List, Tuple, Dict, Set, Optional, Union, Any, Callable, Iterable, Iterator, Generator",
    "from itertools import accumulate, chain, combinations, count, permutations, product, groupby, islice, repeat",
    "from itertools import zip_longest, cycle",
    "from copy import deepcopy",
    "from string import ascii_lowercase",
    "from math import floor, log2, log10, sqrt, comb, gcd, ceil, inf, isqrt, log, prod",
    "from collections import defaultdict, deque, Counter, OrderedDict",
    "from bisect import bisect, bisect_left, bisect_right, insort",
    "from heapq import heappush, heappop, heapify, merge",
    "from functools import reduce, cache, lru_cache, partial",
    "from operator import itemgetter, sub, iand",
    "import copy, string, math, collections, bisect, heapq, functools, itertools, operator, re, sys",
)


class BenchmarkUnavailable(CodethinkerError, RuntimeError):
    """The benchmark cannot be loaded here (LiveCodeBench without the hub): skip it with the message."""


@dataclass(frozen=True)
class Problem:
    id: str  # <task id>/<input index>
    benchmark: str
    code: str  # the program as the benchmark ships it
    entry: str  # the function under test
    input: str  # argument text as inside entry(...)
    expected: str  # the benchmark's stored output (repr text), kept for the cross-check


@dataclass(frozen=True)
class Sample:
    problem: Problem
    flow: Flow

    @property
    def id(self) -> str:
        return self.problem.id


def canonical_name(name: str) -> str:
    key = name.strip().lower().replace("_", "-")
    if key not in _ALIASES:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)} (or CRUXEval-O, REval-FO, LCB-O)")
    return _ALIASES[key]


def load_cruxeval(path: str | os.PathLike[str]) -> list[Problem]:
    fields = {"id": str, "code": str, "input": str, "output": str}
    return [
        Problem(f"{r['id']}/0", "cruxeval", r["code"], "f", r["input"], r["output"]) for r in iter_jsonl(path, fields)
    ]


def reval_args(tuple_text: str) -> str:
    """REval stores each input as an argument tuple, ``"([1.0, 2.0], 0.3,)"``; the call needs the
    argument text inside it, ``"[1.0, 2.0], 0.3"`` (each element's own source text is kept)."""
    try:
        node = ast.parse(tuple_text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"REval input is not Python: {exc}") from None
    if not isinstance(node, ast.Tuple):
        return tuple_text.strip()  # a single argument
    return ", ".join(ast.get_source_segment(tuple_text.strip(), e) or "" for e in node.elts)


def load_reval_fo(path: str | os.PathLike[str]) -> list[Problem]:
    """REval-FO: the HumanEval-derived rows (``test`` is null; ClassEval rows are class-level)."""
    out = []
    for r in iter_jsonl(path, {"task_id": str, "entry_point": str, "code": str, "inputs": list, "outputs": list}):
        if r.get("test") is not None:
            continue
        for i, inp in enumerate(r["inputs"]):
            expected = r["outputs"][i] if i < len(r["outputs"]) else ""
            out.append(Problem(f"{r['task_id']}/{i}", "reval", r["code"], r["entry_point"], reval_args(inp), expected))
    return out


def _names(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def lcb_problem(row: dict[str, Any]) -> Problem:
    """One ``livecodebench/execution-v2`` row; the stdlib imports the program uses go above it."""
    code, used = row["code"], _names(row["code"])
    pre = []
    for line in _LCB_IMPORTS:
        bound = line.split(" import ", 1)[1] if line.startswith("from ") else line[len("import ") :]
        if any(name.strip() in used for name in bound.split(",")):
            pre.append(line)
    program = "\n".join([*pre, code]) if pre else code
    return Problem(f"{row['id']}/0", "livecodebench", program, row["function_name"], row["input"], row["output"])


def load_livecodebench(repo: str = LIVECODEBENCH_REPO) -> list[Problem]:
    """LiveCodeBench-O from the hub; :class:`BenchmarkUnavailable` (a message, not an error) offline."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        raise BenchmarkUnavailable(
            f"LiveCodeBench-O skipped: {repo} is on the Hugging Face hub and HF_HUB_OFFLINE is set"
        )
    try:
        import datasets

        ds = datasets.load_dataset(repo, split="test")
    except Exception as exc:  # any hub or network failure means: not available on this machine
        raise BenchmarkUnavailable(
            f"LiveCodeBench-O skipped: {repo} could not be loaded from the Hugging Face hub ({type(exc).__name__})"
        ) from None
    return [lcb_problem(dict(row)) for row in ds]


def load_problems(
    name: str, mirror: Path | None, cache_dir: str | os.PathLike[str] = "data/downloads", *, download: bool = True
) -> list[Problem]:
    """All problems of one benchmark (CRUXEval/REval: mirror, else the pinned public URL)."""
    from codethinker.data.sources import SOURCES, resolve

    name = canonical_name(name)
    if name == "livecodebench":
        return load_livecodebench()
    path, _ = resolve(SOURCES[name], mirror, cache_dir, download=download)
    return load_cruxeval(path) if name == "cruxeval" else load_reval_fo(path)


def attach_truth(
    problems: Iterable[Problem], *, sandbox: Any = None, sandbox_config: Any = None
) -> tuple[list[Sample], list[dict[str, str]]]:
    """Trace every problem; returns the traced samples and ``{"id", "reason"}`` for the rest."""
    from codethinker.contra.tracer import trace_many

    problems = list(problems)
    outcomes = trace_many(
        [(p.code, p.input, p.entry) for p in problems], sandbox=sandbox, sandbox_config=sandbox_config
    )
    samples, untraced = [], []
    for p, o in zip(problems, outcomes, strict=True):
        if o.flow is not None:
            samples.append(Sample(p, o.flow))
        else:
            untraced.append({"id": p.id, "reason": o.reason or "unknown"})
    return samples, untraced


def expected_mismatches(samples: Iterable[Sample]) -> list[dict[str, str]]:
    """Samples whose traced output differs (by ``==``) from the benchmark's stored output, or whose
    stored output is not a literal: a cross-check of the tracer against the benchmark."""
    from codethinker.contra.values import parse_literal

    out = []
    for s in samples:
        if not s.problem.expected:
            continue
        try:
            same = bool(parse_literal(s.problem.expected) == s.flow.output)
            note = "differs"
        except ValueError:
            same, note = False, "stored output is not a literal"
        if not same:
            out.append(
                {"id": s.id, "note": note, "stored": s.problem.expected[:200], "traced": s.flow.output_text[:200]}
            )
    return out


def write_truth(path: str | os.PathLike[str], bench: TracedBenchmark) -> int:
    """One row per problem, in benchmark order: its fields plus ``truth`` (the truth JSON) or ``reason``."""
    flows = {s.id: s.flow for s in bench.samples}
    why = {u["id"]: u["reason"] for u in bench.untraced}
    rows = []
    for p in bench.problems:
        row: dict[str, Any] = asdict(p)
        if p.id in flows:
            row["truth"] = flows[p.id].to_json()
        else:
            row["reason"] = why.get(p.id, "unknown")
        rows.append(row)
    return write_jsonl(path, rows)


def read_truth(path: str | os.PathLike[str]) -> tuple[list[Problem], list[Sample], list[dict[str, str]]]:
    """Read a file written by :func:`write_truth`: problems, traced samples, untraceable ones."""
    fields = {"id": str, "benchmark": str, "code": str, "entry": str, "input": str, "expected": str}
    problems, samples, untraced = [], [], []
    for r in read_jsonl(path, fields):
        p = Problem(**{k: r[k] for k in fields})
        problems.append(p)
        if r.get("truth"):
            samples.append(Sample(p, Flow.from_json(r["truth"])))
        else:
            untraced.append({"id": p.id, "reason": r.get("reason", "unknown")})
    return problems, samples, untraced


@dataclass
class TracedBenchmark:
    """One benchmark ready to score: traced samples, untraceable problems, the tracer cross-check."""

    name: str
    problems: list[Problem]
    samples: list[Sample]
    untraced: list[dict[str, str]]
    mismatches: list[dict[str, str]]

    @property
    def n_problems(self) -> int:
        return len(self.problems)

    def counts(self) -> dict[str, Any]:
        return {
            "problems": self.n_problems,
            "paper_count": PAPER_COUNTS.get(self.name),
            "traced": len(self.samples),
            "untraceable": len(self.untraced),
            "untraceable_examples": self.untraced[:20],
            "stored_output_mismatches": len(self.mismatches),
            "mismatch_examples": self.mismatches[:20],
        }


def prepare(
    name: str,
    mirror: Path | None,
    cache_dir: str | os.PathLike[str] = "data/downloads",
    *,
    download: bool = True,
    sandbox: Any = None,
) -> TracedBenchmark:
    """Load and trace one benchmark (raises :class:`BenchmarkUnavailable` for LCB offline)."""
    name = canonical_name(name)
    problems = load_problems(name, mirror, cache_dir, download=download)
    samples, untraced = attach_truth(problems, sandbox=sandbox)
    return TracedBenchmark(name, problems, samples, untraced, expected_mismatches(samples))


def load_traced(name: str, path: str | os.PathLike[str]) -> TracedBenchmark:
    """A benchmark from its truth file (the ``eval_truth`` stage's output)."""
    problems, samples, untraced = read_truth(path)
    return TracedBenchmark(canonical_name(name), problems, samples, untraced, expected_mismatches(samples))
