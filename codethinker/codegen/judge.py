"""The code-generation judge (parent side): programs against their problems' tests, in the sandbox.

One sandbox job per (problem, program), run by the ``"leetcode_tests"`` runner of
:mod:`codethinker.codegen.runner`: the preamble, the program and :func:`candidate_source`'s last
line define the candidate; each test (one assert) then runs under ``test_timeout_s`` of its own.
The job as a whole may take ``setup_timeout_s`` (the program's module-level code, the preamble) plus
``test_timeout_s`` per test; past that (plus the sandbox's grace) it is stopped.

A :class:`Judgement` is never an exception: ``pass`` (every test passed), ``fail`` (one or more did
not; the per-test statuses say which: ``fail``, ``error``, ``timeout``), ``no_program`` (nothing to
run), or the sandbox's status for the whole job (``timeout``, ``error``: the program does not
compile, defines no entry, exits; ``memory``, ``killed``), with its detail.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from codethinker.codegen.runner import CANDIDATE
from codethinker.codegen.task import CodegenProblem

__all__ = ["JudgeLimits", "Judgement", "candidate_source", "check_references", "judge_programs"]


@dataclass(frozen=True)
class JudgeLimits:
    """Time and memory of one judged program."""

    test_timeout_s: float = field(default=3.0, metadata={"help": "seconds each test (one assert) may take"})
    setup_timeout_s: float = field(
        default=5.0, metadata={"help": "seconds for the program's module-level code and the preamble"}
    )
    memory_mb: int = field(default=2048, metadata={"help": "address-space cap per program, MiB"})
    workers: int | None = field(default=None, metadata={"help": "sandbox workers (None: one per core)"})

    def __post_init__(self) -> None:
        if not (self.test_timeout_s > 0 and self.setup_timeout_s > 0):
            raise ValueError("test_timeout_s and setup_timeout_s must be > 0")

    def job_timeout(self, n_tests: int) -> float:
        return self.setup_timeout_s + self.test_timeout_s * n_tests


@dataclass(frozen=True)
class Judgement:
    """The verdict on one program; ``tests``: each test's status, in order (empty when none ran)."""

    status: str
    tests: tuple[str, ...] = ()
    total: int = 0
    detail: str = ""

    @property
    def passed(self) -> int:
        return sum(s == "pass" for s in self.tests)

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


def candidate_source(problem: CodegenProblem, code: str) -> str:
    """The job's source: the preamble, the program, and the function that makes a fresh candidate."""
    return f"{problem.preamble}\n\n{code}\n\n\ndef {CANDIDATE}():\n    return {problem.entry_point}\n"


def _judgement(res: object, total: int) -> Judgement:
    """The verdict of one sandbox result of the ``leetcode_tests`` runner."""
    status = getattr(res, "status", "killed")
    if status != "ok":
        why = f"{getattr(res, 'error_type', None)}: {getattr(res, 'error_message', None)}"
        return Judgement(status, (), total, why[:500])
    v = getattr(res, "value", None)
    tests = v.get("tests") if type(v) is dict else None
    if type(tests) is not list or len(tests) != total or not all(type(t) is dict for t in tests):
        return Judgement("error", (), total, "malformed test result")
    statuses = tuple(str(t.get("status")) for t in tests)
    bad = [f"test {k}: {s}: {tests[k - 1].get('detail', '')}" for k, s in enumerate(statuses, 1) if s != "pass"]
    return Judgement("pass" if not bad else "fail", statuses, total, "; ".join(bad)[:500])


def judge_programs(
    problems: Sequence[CodegenProblem], codes: Sequence[str], limits: JudgeLimits | None = None
) -> list[Judgement]:
    """One :class:`Judgement` per (problem, program); one sandbox for the batch (``limits``: None,
    the defaults of :class:`JudgeLimits`)."""
    limits = limits or JudgeLimits()
    from codethinker.sandbox import Job, Sandbox, SandboxConfig

    pairs = list(zip(problems, codes, strict=True))
    out: list[Judgement | None] = [None] * len(pairs)
    jobs, slots = [], []
    for k, (p, code) in enumerate(pairs):
        if not code.strip():
            out[k] = Judgement("no_program", (), len(p.tests), "no program in the completion")
            continue
        opts = {"preamble": p.preamble, "tests": list(p.tests), "limit": limits.test_timeout_s}
        jobs.append(Job(candidate_source(p, code), entry=CANDIDATE, runner="leetcode_tests", options=opts))
        slots.append(k)
    if jobs:
        timeout = max(limits.job_timeout(len(pairs[k][0].tests)) for k in slots)
        cfg = SandboxConfig(timeout_s=timeout, memory_mb=limits.memory_mb, workers=limits.workers, grace_s=2.0)
        with Sandbox(cfg) as sb:
            for k, res in zip(slots, sb.map(jobs), strict=True):
                out[k] = _judgement(res, len(pairs[k][0].tests))
    return out  # type: ignore[return-value]


def check_references(problems: list[CodegenProblem], limits: JudgeLimits, limit: int | None = None) -> dict[str, Any]:
    """The outcome of every problem's reference solution (the first ``limit`` problems; None: all):
    counts, and each failure with its status, per-test statuses and reason."""
    t0 = time.perf_counter()
    todo = problems[:limit] if limit is not None else problems
    verdicts = judge_programs(todo, [p.reference for p in todo], limits)
    failures = [
        {"id": p.id, "split": p.split, "status": v.status, "tests": list(v.tests), "detail": v.detail}
        for p, v in zip(todo, verdicts, strict=True)
        if not v.ok
    ]
    return {
        "problems": len(problems),
        "checked": len(todo),
        "passed": sum(v.ok for v in verdicts),
        "tests": sum(v.total for v in verdicts),
        "tests_passed": sum(v.passed for v in verdicts),
        "failures": failures,
        "seconds": round(time.perf_counter() - t0, 1),
    }
