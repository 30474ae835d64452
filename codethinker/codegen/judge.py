"""The code-generation judge (parent side): programs against their problems' tests, in the sandbox.

One sandbox job per (problem, program), run by the ``"leetcode_calls"`` runner of
:mod:`codethinker.codegen.runner`: the preamble, the program and :func:`candidate_source`'s last line
define the candidate; each test's call (:mod:`codethinker.codegen.checks`) then runs under
``test_timeout_s`` of its own and its return value comes back as plain data. **The verdict is made
here**: the expected values never enter the sandbox, and each returned value is compared in this
process (:meth:`~codethinker.codegen.checks.Check.passes`). The sandbox also hides the checkout and the
data mirror (:func:`codethinker.params.answer_paths`), where the tests and their answers are stored. The
job as a whole may take ``setup_timeout_s`` (the program's module-level code, the preamble) plus
``test_timeout_s`` per test; past that (plus the sandbox's grace) it is stopped.

A :class:`Judgement` is never an exception, and one program's result never touches another's: ``pass``
(every test passed), ``fail`` (one or more did not; the per-test statuses say which: ``fail``, ``error``,
``timeout``), ``no_program`` (nothing to run), the sandbox's status for the whole job (``timeout``,
``error``: the program does not compile, defines no entry, exits; ``memory``, ``killed``), or ``error``
with "malformed result" when the frame that came back is not the runner's shape (a program that wrote
a frame of its own).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from codethinker.codegen.checks import Check, parse_check
from codethinker.codegen.runner import CANDIDATE
from codethinker.codegen.task import CodegenProblem
from codethinker.params import answer_paths

__all__ = [
    "JudgeLimits",
    "Judgement",
    "candidate_source",
    "check_references",
    "iter_judgements",
    "judge_programs",
    "problem_checks",
]

TEST_STATUSES = ("pass", "fail", "error", "timeout")
DETAIL_CHARS = 500


@dataclass(frozen=True)
class JudgeLimits:
    """Time and memory of one judged program."""

    test_timeout_s: float = field(default=3.0, metadata={"help": "seconds each test (one call) may take"})
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


@functools.lru_cache(maxsize=4096)
def _checks(tests: tuple[str, ...]) -> tuple[Check, ...]:
    return tuple(parse_check(t) for t in tests)


def problem_checks(problem: CodegenProblem) -> tuple[Check, ...]:
    """The problem's tests as :class:`~codethinker.codegen.checks.Check` (parsed once per test tuple);
    raises :class:`~codethinker.codegen.checks.CheckError` for a test in no judged form."""
    return _checks(tuple(problem.tests))


def _text(x: Any, limit: int = 200) -> str:
    """A field of the returned frame as bounded text (anything but a str is shown by its type only)."""
    return x[:limit] if type(x) is str else f"<{type(x).__name__}>"


def _test_status(item: Any, check: Check, limit: float) -> tuple[str, str]:
    """(status, detail) of one test from the runner's item for it; a malformed item is an ``error``."""
    if type(item) is not dict or type(item.get("status")) is not str:
        return "error", "malformed result"
    status = item["status"]
    if status == "ok" and "value" in item:
        return ("pass", "") if check.passes(item["value"]) else ("fail", "wrong value")
    if status == "timeout":
        return "timeout", f"over {limit:.2f} s"
    if status == "error":
        return "error", _text(item.get("detail"))
    return "error", "malformed result"


def _judgement(res: Any, checks: Sequence[Check], limit: float) -> Judgement:
    """The verdict of one sandbox result of the ``leetcode_calls`` runner; never raises."""
    total = len(checks)
    try:
        status = getattr(res, "status", "killed")
        if status != "ok":
            why = f"{_text(getattr(res, 'error_type', None))}: {_text(getattr(res, 'error_message', None), 400)}"
            return Judgement(status if type(status) is str else "killed", (), total, why[:DETAIL_CHARS])
        v = getattr(res, "value", None)
        items = v.get("results") if type(v) is dict else None
        if type(items) is not list or len(items) != total:
            return Judgement("error", (), total, "malformed result")
        verdicts = [_test_status(item, check, limit) for item, check in zip(items, checks, strict=True)]
    except Exception as exc:  # whatever a forged frame holds costs only its own program
        return Judgement("error", (), total, f"malformed result ({type(exc).__name__})")
    statuses = tuple(s for s, _ in verdicts)
    bad = [f"test {k}: {s}: {d}" for k, (s, d) in enumerate(verdicts, 1) if s != "pass"]
    return Judgement("pass" if not bad else "fail", statuses, total, "; ".join(bad)[:DETAIL_CHARS])


def _job(problem: CodegenProblem, code: str, limits: JudgeLimits) -> Any:
    from codethinker.sandbox import Job

    calls = [[c.args, c.kind] for c in problem_checks(problem)]
    opts = {"preamble": problem.preamble, "calls": calls, "limit": limits.test_timeout_s}
    return Job(candidate_source(problem, code), entry=CANDIDATE, runner="leetcode_calls", options=opts)


def iter_judgements(
    problems: Sequence[CodegenProblem],
    codes: Sequence[str],
    limits: JudgeLimits | None = None,
    progress: str | None = None,
) -> Iterator[Judgement]:
    """One :class:`Judgement` per (problem, program), in order, each as soon as it is known (the jobs are
    made as workers become free, and a result is dropped once judged); one sandbox for the batch
    (``limits``: None, the defaults of :class:`JudgeLimits`; ``progress``: a bar with this label)."""
    limits = limits or JudgeLimits()
    from codethinker.sandbox import Sandbox, SandboxConfig

    pairs = list(zip(problems, codes, strict=True))
    for p, _ in pairs:
        problem_checks(p)  # a test in no judged form fails here, before any sandbox starts
    runs = [bool(code.strip()) for _, code in pairs]
    sb = None
    if any(runs):
        timeout = max(limits.job_timeout(len(p.tests)) for (p, _), run in zip(pairs, runs, strict=True) if run)
        cfg = SandboxConfig(
            timeout_s=timeout,
            memory_mb=limits.memory_mb,
            workers=limits.workers,
            grace_s=2.0,
            hide=answer_paths(),
            host="system",
        )
        sb = Sandbox(cfg)
    try:
        jobs = (_job(p, code, limits) for (p, code), run in zip(pairs, runs, strict=True) if run)
        bar: bool | str = progress or False
        results = sb.imap(jobs, progress=bar, total=sum(runs)) if sb is not None else iter(())
        for (p, _code), run in zip(pairs, runs, strict=True):
            checks = problem_checks(p)
            if not run:
                yield Judgement("no_program", (), len(checks), "no program in the completion")
            else:
                yield _judgement(next(results), checks, limits.test_timeout_s)
    finally:
        if sb is not None:
            sb.close()


def judge_programs(
    problems: Sequence[CodegenProblem],
    codes: Sequence[str],
    limits: JudgeLimits | None = None,
    progress: str | None = None,
) -> list[Judgement]:
    """One :class:`Judgement` per (problem, program) (:func:`iter_judgements` as a list)."""
    return list(iter_judgements(problems, codes, limits, progress))


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
