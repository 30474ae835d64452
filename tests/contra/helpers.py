"""Helpers shared by the ConTra and reward tests: flows built without the sandbox, corruptions
of a valid trace, and a wall-clock guard for the hostile-input tests."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator, Sequence
from typing import Any

from codethinker.contra.blocks import split_blocks
from codethinker.contra.normalize import normalize_source
from codethinker.contra.render import TAGS
from codethinker.contra.tracer import Flow
from codethinker.contra.values import literal_repr, parse_literal

# Four blocks with CCW weights 1, 1, 1, 2 (the paper's worked example, SPEC §4).
EXAMPLE_SRC = """def f(n):
    a = n + 1
    b = a * 2
    c = b - 3
    return [i for i in range(c)]
"""
EXAMPLE_LOCALS = [{"n": 2, "a": 3}, {"n": 2, "a": 3, "b": 6}, {"n": 2, "a": 3, "b": 6, "c": 3}]
EXAMPLE_LOCALS.append(EXAMPLE_LOCALS[-1])
EXAMPLE_OUTPUT = [0, 1, 2]


def make_flow(
    src: str, input_text: str, locals_per_block: Sequence[dict[str, Any]], output: Any, entry: str = "f"
) -> Flow:
    """A ground-truth flow assembled by hand (normalize + split_blocks, no execution)."""
    prog = normalize_source(src, entry)
    specs = split_blocks(prog)
    assert len(specs) == len(locals_per_block), [(s.start, s.end) for s in specs]
    return Flow.from_dict(
        {
            "version": 1,
            "entry": entry,
            "input": input_text,
            "code": prog.text,
            "blocks": [
                {"start": s.start, "end": s.end, "weight": s.weight, "locals": literal_repr(loc)}
                for s, loc in zip(specs, locals_per_block, strict=True)
            ],
            "output": literal_repr(output),
        }
    )


def example_flow() -> Flow:
    return make_flow(EXAMPLE_SRC, "2", EXAMPLE_LOCALS, EXAMPLE_OUTPUT)


# --------------------------------------------------------------------------- trace surgery
def split_groups(trace: str) -> tuple[list[str], list[list[str]], list[str]]:
    """``(head, blocks, tail)``: ``head`` = ["[TRACE]"], each block its lines [CODE]..[/LOCALS],
    ``tail`` = [RETURN]..[/TRACE]. Works on traces produced by ``render_trace``."""
    lines = trace.split("\n")
    assert lines[0] == "[TRACE]"
    blocks: list[list[str]] = []
    i = 1
    while lines[i] == "[CODE]":
        j = lines.index("[/LOCALS]", i)
        blocks.append(lines[i : j + 1])
        i = j + 1
    return lines[:1], blocks, lines[i:]


def join_groups(head: list[str], blocks: list[list[str]], tail: list[str]) -> str:
    return "\n".join([*head, *(ln for b in blocks for ln in b), *tail])


def set_locals(trace: str, block: int, text: str) -> str:
    head, blocks, tail = split_groups(trace)
    b = blocks[block]
    k = b.index("[LOCALS]")
    blocks[block] = [*b[: k + 1], text, "[/LOCALS]"]
    return join_groups(head, blocks, tail)


def set_answer(trace: str, answer: str) -> str:
    head, blocks, tail = split_groups(trace)
    line = tail[1]
    tail[1] = line[: line.rindex(" == ")] + " == " + answer
    return join_groups(head, blocks, tail)


def corrupt_locals_text(text: str, choice: int = 0) -> str:
    """A dict literal that is *not* strictly equal to ``text``'s dict."""
    d = parse_literal(text)
    assert type(d) is dict
    if not d or choice % 3 == 0:
        d = {**d, "__not_a_local__": 0}
    elif choice % 3 == 1:
        k = sorted(d, key=repr)[choice % len(d)]
        d = {**d, k: ("corrupted", d[k])}
    else:
        k = sorted(d, key=repr)[choice % len(d)]
        d = {kk: v for kk, v in d.items() if kk != k}
    return repr(d)


def tag_line_indices(trace: str) -> list[int]:
    return [i for i, ln in enumerate(trace.split("\n")) if ln in TAGS]


# --------------------------------------------------------------------------- time guard
class TookTooLong(AssertionError):
    pass


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Fail (instead of hanging) when the body runs longer than ``seconds`` (SIGALRM, main thread)."""

    def _alarm(signum: int, frame: Any) -> None:
        raise TookTooLong(f"took longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    t0 = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - t0 < seconds
