"""Math benchmarks: GSM8K (1,319), GSM-Hard (1,319) and MATH500 (500), judged with math-verify.

Prompt: the problem, then the common instruction of these sets for chat models (Qwen2.5-Math,
DeepSeek-R1): "Please reason step by step, and put your final answer within \\boxed{}." Generation
stops at the end-of-turn strings of the common chat templates, should a model write them as text
(``<|im_end|>``, ``<|endoftext|>``, ``<|eot_id|>``, ``</s>``; EOS ends a turn anyway), and where a
model starts a next problem in few-shot style (``\\n\\nQuestion:``, ``\\n\\nProblem:``).

Gold: GSM8K the number after ``####`` (commas stripped); GSM-Hard ``target`` (integral values as
integers, others in plain decimal notation, never an exponent); MATH500 ``answer`` (LaTeX).

Extraction (math-verify 0.9 ``parse``) from the model's text: ``LatexExtractionConfig`` with
``boxed_match_priority=0`` and ``ExprExtractionConfig``: the last ``\\boxed{}`` first (with the boxes
just before it when under 10 characters apart, or under 70 with "and", "or", "," or ";" between:
``\\boxed{999}, no: \\boxed{1000}`` reads as the pair 999, 1000), then "final answer is X", then
"answer: X", then the last LaTeX span or plain number/expression. The gold is parsed with
``ExprExtractionConfig`` (GSM8K, GSM-Hard: a decimal is a Float) or ``LatexExtractionConfig`` from
``$<answer>$`` (MATH500). Equivalence (``verify``, its defaults): equal sympy values (symbolically;
when one side is a Float, after rounding both to 6 decimals), or the same normalized LaTeX string;
sets, intervals, tuples and matrices element-wise; ``x = 5`` matches 5. So \\frac{1}{2}, 0.5, 1/2,
2^{-1} agree; "1,000", 1{,}000 and \\$1,000 read as 1000; GSM-Hard's 10/3 matches 3.3333333333333335
and 3.333333 does, 3.33 does not; 0.5000001 matches 1/2 and 0.0000025 matches 0.0000020107 (6
decimals). math-verify reads ``1\\,000`` and ``1 000`` as other values, 50\\% differs from 1/2, and
``2.0107e-06`` in LaTeX is not a number (``\\times 10^{-6}`` is).

Statuses: ``pass``, ``fail``, ``no_answer`` (nothing extracted; braces nested over
``MAX_BRACE_DEPTH`` deep, which math-verify misreads), ``timeout`` (the limit of
``timeout_s`` seconds per parse or per comparison ran out: 10^{10^{100}}), ``error`` (anything that
raised, the reference unparsable, a number of over 4,300 digits). ``judge`` never raises.

Limits: only the last ``max_chars`` characters of a text are read (the answer is at the end; this
bounds the regex work on megabytes of junk). The time limits are a SIGALRM timer (``_deadline``, in
place of math-verify's own single ``signal.alarm``): they need the main thread (elsewhere every
verdict is an ``error`` that says so) and take over SIGALRM while they run; the timer fires again
every ``REARM_S`` until the step ends, as one alarm can be lost (raised inside a gc callback or a
``__del__``, where Python only prints it: with math-verify's one alarm a CI run judged 300 nested
parentheses for 119 s). Such a lost alarm is dropped while the timer runs, not handed to
``sys.unraisablehook``: a hook that formats its traceback (Python's, pytest's) could be cut by the next
alarm, and pytest reports that as the test's error. A step in C that never returns to Python could
outlast them. A hostile text costs at most about two ``timeout_s``.
"""

from __future__ import annotations

import itertools
import math
import re
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

from codethinker.data.io import RecordError, iter_jsonl
from codethinker.evaluation.task import Item, Verdict, register

__all__ = ["GSM8K", "INSTRUCTION", "MATH500", "STOP", "GSMHard", "MathBench", "brace_depth", "number_text"]

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
STOP = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>", "\n\nQuestion:", "\n\nProblem:")
MAX_TEXT_CHARS = 20_000
MAX_BRACE_DEPTH = 50
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
TIMEOUT_S = 5  # math-verify's default, per parse and per comparison
REARM_S = 0.05  # the timer fires again this often until the timed step ends (one alarm can be lost)


def number_text(x: float | int) -> str:
    """A number as a model would write it: ``18``, ``-3.5``, ``0.0000020107`` (never ``2.0107e-06``).

    >>> number_text(-9867630.0), number_text(2.0107e-06), number_text(3244047.0999999996)
    ('-9867630', '0.0000020107', '3244047.0999999996')
    """
    if isinstance(x, int) or x.is_integer():
        return str(int(x))
    return format(Decimal(repr(x)), "f")


def _configs() -> tuple[list[Any], list[Any], list[Any]]:
    """(prediction, numeric gold, LaTeX gold) extraction configs (math-verify imported on first use).
    One LaTeX and one expression config in all: math-verify caches one compiled regex set of each."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    latex, expr = LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()
    return [latex, expr], [expr], [latex]


def brace_depth(text: str) -> int:
    """The deepest ``{`` nesting of ``text`` (a stray ``}`` does not go below zero).

    >>> brace_depth("\\frac{1}{\\sqrt{2}}"), brace_depth("}}{")
    (2, 1)
    """
    depth = deepest = 0
    for ch in text:
        if ch == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == "}":
            depth = max(depth - 1, 0)
    return deepest


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise math-verify's ``TimeoutException`` in the block after ``seconds``, and again every
    ``REARM_S`` until the block ends. Main thread only (``signal.signal`` raises ``ValueError``
    elsewhere); the previous SIGALRM handler is restored on the way out. Meanwhile an alarm that lands
    where Python can only report it (a gc callback, a ``__del__``) is dropped instead of reaching the
    previous ``sys.unraisablehook``; anything else still goes there."""
    from math_verify.errors import TimeoutException

    def alarm(signum: int, frame: Any) -> None:
        raise TimeoutException(f"over {seconds} s")

    def unraisable(args: Any) -> None:
        if not (isinstance(args.exc_type, type) and issubclass(args.exc_type, TimeoutException)):
            hook(args)

    hook = sys.unraisablehook
    sys.unraisablehook = unraisable
    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds, REARM_S)
        yield
    finally:
        while True:  # a last alarm may land while disarming: disarm again
            try:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)
                sys.unraisablehook = hook
                break
            except TimeoutException:
                continue


def _quiet_math_verify() -> None:
    """math-verify logs a warning on its first untimed call; ``_deadline`` times every call."""
    from math_verify import grader, parser

    grader.TIMEOUT_WARNING_SHOWN = parser.TIMEOUT_WARNING_SHOWN = True


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    except Exception:
        return type(exc).__name__


class MathBench:
    """One math benchmark: ``_records`` yields (id, problem, gold text) from the source file."""

    name = display = source = ""
    group = "math"
    stop = STOP
    latex_gold = False  # parse the gold as LaTeX (MATH500) rather than as a number

    def __init__(self, timeout_s: int = TIMEOUT_S, max_chars: int = MAX_TEXT_CHARS) -> None:
        if int(timeout_s) < 1 or max_chars < 1:
            raise ValueError("need timeout_s >= 1 (whole seconds) and max_chars >= 1")
        self.timeout_s, self.max_chars = int(timeout_s), max_chars

    def _records(self, path: Path) -> Iterator[tuple[str, str, str]]:
        raise NotImplementedError

    def load(self, mirror: Path | None, cache_dir: Path) -> list[Item]:
        from codethinker.data.sources import SOURCES, resolve

        path, _ = resolve(SOURCES[self.source], mirror, cache_dir)
        return [
            Item(rid, [{"role": "user", "content": f"{problem}\n{INSTRUCTION}"}], {"answer": gold})
            for rid, problem, gold in self._records(path)
        ]

    def unavailable(self) -> str | None:
        return None  # math-verify is a dependency of the project

    def reference_text(self, item: Item) -> str:
        return f"Working through the problem gives the result. The answer is \\boxed{{{item.reference['answer']}}}."

    def judge(self, items: Sequence[Item], texts: Sequence[str]) -> list[Verdict]:
        golds: dict[str, Any] = {}
        out = []
        for it, text in zip(items, texts, strict=True):
            try:
                if it.id not in golds:
                    golds[it.id] = self._parse_gold(str(it.reference["answer"]))
                out.append(self._judge_one(golds[it.id], text))
            except BaseException as exc:  # math-verify's TimeoutException is a BaseException
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                out.append(Verdict(False, "error", _describe(exc)))
        return out

    def _parse_gold(self, gold: str) -> list[Any]:
        from math_verify import parse

        _, numeric, latex = _configs()
        text, config = (f"${gold}$", latex) if self.latex_gold else (gold, numeric)
        _quiet_math_verify()
        with _deadline(self.timeout_s):
            parsed = parse(text, extraction_config=config, parsing_timeout=None, raise_on_error=True)
        if not parsed:
            raise ValueError(f"the reference answer {gold[:100]!r} could not be parsed")
        return parsed

    def _judge_one(self, gold: list[Any], text: str) -> Verdict:
        from math_verify import parse, verify
        from math_verify.errors import TimeoutException

        text = text[-self.max_chars :]
        if (depth := brace_depth(text)) > MAX_BRACE_DEPTH:  # math-verify misreads these (1/2^500 as 1/2)
            return Verdict(False, "no_answer", f"braces nested {depth} deep (over {MAX_BRACE_DEPTH}): not read")
        _quiet_math_verify()
        try:
            with _deadline(self.timeout_s):
                pred = parse(text, extraction_config=_configs()[0], parsing_timeout=None, raise_on_error=True)
        except TimeoutException:
            return Verdict(False, "timeout", f"extracting the answer took over {self.timeout_s} s")
        if not pred:
            return Verdict(False, "no_answer", "no \\boxed{} answer, number or expression found")
        shown = f"answer {str(pred[-1])[:120]!r}, reference {str(gold[-1])[:120]!r}"
        timed_out = False
        for g, p in itertools.product(gold, pred):
            try:
                with _deadline(self.timeout_s):
                    equal = verify(g, p, timeout_seconds=None, raise_on_error=True)
                if equal:
                    return Verdict(True, "pass", shown)
            except TimeoutException:
                timed_out = True
            except Exception:  # math-verify's own reading (raise_on_error=False): not equal
                continue
        if timed_out:
            return Verdict(False, "timeout", f"comparing took over {self.timeout_s} s; {shown}")
        return Verdict(False, "fail", shown)


@register("gsm8k")
class GSM8K(MathBench):
    """GSM8K test (ids ``gsm8k/<row>``, 0-based); the gold is the number after ``####``."""

    name, display, source = "gsm8k", "GSM8K", "gsm8k"

    def _records(self, path: Path) -> Iterator[tuple[str, str, str]]:
        for i, rec in enumerate(iter_jsonl(path, {"question": str, "answer": str})):
            _, sep, final = rec["answer"].rpartition("####")
            gold = final.strip().replace(",", "")
            if not sep or not _NUMBER.fullmatch(gold):
                raise RecordError(path, i + 1, "answer", f"no final line '#### <number>' (got {final.strip()[:50]!r})")
            yield f"gsm8k/{i}", rec["question"], gold


@register("gsm-hard")
class GSMHard(MathBench):
    """GSM-Hard (PAL; ids ``gsm-hard/<row>``, 0-based: not GSM8K's order); the gold is ``target``."""

    name, display, source = "gsm-hard", "GSM-Hard", "gsm-hard"

    def _records(self, path: Path) -> Iterator[tuple[str, str, str]]:
        for i, rec in enumerate(iter_jsonl(path, {"input": str, "target": (int, float)})):
            target = rec["target"]
            if isinstance(target, bool) or (isinstance(target, float) and not math.isfinite(target)):
                raise RecordError(path, i + 1, "target", f"expected a finite number, got {target!r}")
            yield f"gsm-hard/{i}", rec["input"], number_text(target)


@register("math500")
class MATH500(MathBench):
    """MATH500 (PRM800K's held-out MATH test split; ids are ``unique_id``); the gold is ``answer``."""

    name, display, source = "math500", "MATH500", "math500"
    latex_gold = True

    def _records(self, path: Path) -> Iterator[tuple[str, str, str]]:
        for rec in iter_jsonl(path, {"problem": str, "answer": str, "unique_id": str}):
            yield rec["unique_id"], rec["problem"], rec["answer"]
