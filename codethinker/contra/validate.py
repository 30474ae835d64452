"""Strict ConTra validator (SPEC §3, paper App. D.1): text -> parsed blocks, or the first rule broken.

Nothing in model output is ever executed: LOCALS and the answer are read with the grammar of
``ast.literal_eval`` only (:func:`~codethinker.contra.values.parse_literal`), under size caps, so
hostile text (huge literals, deep nesting, megabytes of junk) is rejected quickly with bounded
memory. Every pass over the text is linear in its length: no regex here can backtrack (each is
anchored with no overlapping repeats), and white space is handled by ``str`` methods and one
left-to-right scan (:func:`~codethinker.contra.values.lex`). White space counts only where
Python's tokenizer allows it (``PY_SPACE``): ``{'a':\\xa01}`` is not a literal. Rules, as
``reason`` codes:

=================  ==============================================================
``too_long``       text, one LOCALS / RETURN body, or (against a truth) a LOCALS body more than
                   4x + 4096 characters longer than the truth's, exceeds its size cap
``wrapper``        first line is not ``[TRACE]`` or last line is not ``[/TRACE]``
``tag_space``      a tag line carries leading or trailing white space
``structure``      groups out of order, unclosed, a stray line, no block, no RETURN
``lineno``         a code line is not ``[LINENO X]`` + four spaces + source, X >= 0
``lineno_order``   LINENOs not consecutive, first block not at 0, or a gap between blocks
``locals``         a LOCALS body is not a dict literal
``return``         RETURN is not one ``assert <entry>(<the input>) == <literal>``
``block_count``    number of blocks differs from the ground truth
``block_range``    a block's LINENO range differs from the ground truth
``code``           a code line differs from the source (outer white space ignored)
=================  ==============================================================

>>> parse_trace("[TRACE]\\n[RETURN]\\nassert f(1) == 2\\n[/RETURN]\\n[/TRACE]").reason
'structure'
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from codethinker.contra.render import (
    CODE_CLOSE,
    CODE_OPEN,
    LOCALS_CLOSE,
    LOCALS_OPEN,
    RETURN_CLOSE,
    RETURN_OPEN,
    TAGS,
    THOUGHT_CLOSE,
    THOUGHT_OPEN,
    TRACE_CLOSE,
    TRACE_OPEN,
)
from codethinker.contra.tracer import Block, Flow
from codethinker.contra.values import PY_SPACE, check_numbers, lex, literal_from_node, parse_literal

__all__ = ["ParsedBlock", "Validation", "parse_trace", "prefix_score", "validate"]

MAX_TRACE_CHARS = 2_000_000
MAX_LITERAL_CHARS = 200_000
_TAGSET = frozenset(TAGS)
_LINENO = re.compile(r"\[LINENO (0|[1-9][0-9]{0,8})\] {4}(.*)\Z", re.S)  # anchored, one greedy tail
_SPACE_RUN = re.compile(f"[{PY_SPACE}]+")  # one character class repeated: a match never backtracks
_NO_SPACE = str.maketrans("", "", PY_SPACE)
_PUNCT = frozenset(",:[]{}()")  # one-character tokens that start or end no longer token


@dataclass(frozen=True)
class ParsedBlock:
    start: int
    end: int
    code: tuple[str, ...]  # source lines as written after the LINENO prefix
    thought: str
    locals_text: str
    locals: dict[str, Any] | None = None  # parsed lazily by the reward unless already needed


@dataclass(frozen=True)
class Validation:
    ok: bool
    reason: str | None = None
    detail: str = ""
    blocks: tuple[ParsedBlock, ...] = ()
    answer: Any = None  # the literal on the right of ``==``
    answer_text: str = ""
    complete: bool = True  # False for an unfinished prefix (prefix_score)
    extra: dict[str, Any] = field(default_factory=dict)


class _Fail(Exception):
    def __init__(self, reason: str, detail: str):
        self.reason, self.detail = reason, detail


class _Eof(Exception):
    """Input ended inside a group (only an error for complete traces)."""


def _args_dump(call: ast.Call) -> str | None:
    """The call's arguments as one ``ast.dump`` (``None`` when nested past the recursion limit)."""
    try:
        return ast.dump(ast.Tuple([*call.args, *call.keywords], ast.Load()))
    except (RecursionError, MemoryError):
        return None


@functools.lru_cache(maxsize=4096)
def _call_args_dump(input_text: str) -> str | None:
    try:
        call = ast.parse(f"_f({input_text})", mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return _args_dump(call) if isinstance(call, ast.Call) else None


def _parse_assert(line: str, entry: str | None, input_text: str | None = None) -> tuple[Any, str]:
    """``(answer literal, its text)`` of ``assert entry(...) == <literal>``; with ``input_text`` the
    call's arguments must be that input (same AST), so an assertion about another call earns nothing."""
    if len(line) > MAX_LITERAL_CHARS:
        raise _Fail("too_long", "RETURN longer than the cap")
    stmt = line.strip(PY_SPACE)
    try:
        check_numbers(stmt)
        tree = ast.parse(stmt)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise _Fail("return", "RETURN is not valid Python within the caps") from None
    ok = (
        len(tree.body) == 1
        and isinstance(node := tree.body[0], ast.Assert)
        and node.msg is None
        and isinstance(cmp := node.test, ast.Compare)
        and len(cmp.ops) == 1
        and isinstance(cmp.ops[0], ast.Eq)
        and isinstance(call := cmp.left, ast.Call)
        and isinstance(call.func, ast.Name)
        and (entry is None or call.func.id == entry)
    )
    if not ok:
        raise _Fail("return", f"RETURN must be one `assert {entry or 'f'}(...) == <literal>`")
    if input_text is not None:
        if (call.end_col_offset or 0) - call.col_offset > 16 * len(input_text) + 4096:  # UTF-8 bytes, 4x spacing
            raise _Fail("return", "the call in RETURN is far longer than the given input")
        given = _args_dump(call)  # linear in the call's size times its depth: both bounded here
        if given is None or given != _call_args_dump(input_text):
            raise _Fail("return", "the call in RETURN is not the given input")
    right = cmp.comparators[0]
    try:
        value = literal_from_node(right)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _Fail("return", "the right side of == is not a literal") from None
    raw = stmt.encode()  # col offsets are UTF-8 byte offsets
    return value, raw[right.col_offset : right.end_col_offset].decode(errors="replace")


class _Lines:
    """A trace's lines read one at a time; ``pos`` is how many were read (the 1-based number of the
    last one). :class:`_Eof` past the end, :class:`_Fail` on a rule broken while reading."""

    __slots__ = ("lines", "n", "pos")

    def __init__(self, lines: list[str]):
        self.lines, self.n, self.pos = lines, len(lines), 0

    def take(self) -> str:
        if self.pos >= self.n:
            raise _Eof
        line = self.lines[self.pos]
        self.pos += 1
        if line not in _TAGSET and line.strip() in _TAGSET:
            raise _Fail("tag_space", f"line {self.pos}: tag with white space: {line[:40]!r}")
        return line

    def expect(self, tag: str) -> None:
        got = self.take()
        if got != tag:
            raise _Fail("structure", f"line {self.pos}: expected {tag}, got {got[:40]!r}")

    def body(self, close: str) -> list[str]:
        out = []
        while (line := self.take()) != close:
            if line in _TAGSET:
                raise _Fail("structure", f"line {self.pos}: {line} inside a group before {close}")
            out.append(line)
        return out


def _trace_lines(text: str, partial: bool) -> list[str]:
    """The lines of ``text`` to read (``partial``: an unfinished prefix)."""
    lines = text.split("\n")
    if not partial and len(lines) > 1 and lines[-1] == "":
        lines.pop()  # one trailing newline is not text outside the wrapper
    elif partial and lines[-1] not in _TAGSET:
        lines.pop()  # an unfinished prefix may end inside a line
    return lines


def _code_block(cur: _Lines, start: int, index: int) -> ParsedBlock:
    """Block ``index`` after its ``[CODE]`` tag: numbered code lines from LINENO ``start`` on, then
    its THOUGHT and LOCALS groups (LOCALS unparsed)."""
    code, next_line = [], start
    for raw in cur.body(CODE_CLOSE):
        m = _LINENO.match(raw)
        if not m:
            raise _Fail("lineno", f"line {cur.pos - 1}: not `[LINENO X]    source`")
        if int(m.group(1)) != next_line:
            raise _Fail("lineno_order", f"line {cur.pos - 1}: LINENO {m.group(1)}, expected {next_line}")
        next_line += 1
        code.append(m.group(2))
    if not code:
        raise _Fail("structure", f"line {cur.pos}: empty [CODE] group")
    cur.expect(THOUGHT_OPEN)
    thought = "\n".join(cur.body(THOUGHT_CLOSE))
    cur.expect(LOCALS_OPEN)
    loc_text = "\n".join(cur.body(LOCALS_CLOSE))
    if len(loc_text) > MAX_LITERAL_CHARS:
        raise _Fail("too_long", f"block {index}: LOCALS longer than the cap")
    return ParsedBlock(start, next_line - 1, tuple(code), thought, loc_text)


def _return_group(
    cur: _Lines, entry: str | None, known: tuple[str, Any, str] | None, input_text: str | None
) -> tuple[Any, str]:
    """``(answer, its text)`` of the RETURN group after its tag, which must close the trace."""
    ret = [ln for ln in cur.body(RETURN_CLOSE) if ln.strip(PY_SPACE)]
    if len(ret) != 1:
        raise _Fail("return", f"RETURN holds {len(ret)} non-empty lines, expected 1")
    if known is not None and ret[0].strip(PY_SPACE) == known[0]:
        value, answer_text = known[1], known[2]
    else:
        value, answer_text = _parse_assert(ret[0], entry, input_text)
    cur.expect(TRACE_CLOSE)
    if cur.pos != cur.n:
        raise _Fail("wrapper", "text after [/TRACE]")
    return value, answer_text


def _scan(
    text: str,
    entry: str | None,
    partial: bool,
    known: tuple[str, Any, str] | None = None,
    input_text: str | None = None,
) -> Validation:
    """Structure rules; ``known`` = (truth assertion line, output, output text) skips re-parsing
    a RETURN that matches the truth character for character."""
    if len(text) > MAX_TRACE_CHARS:
        return Validation(False, "too_long", f"{len(text)} characters > {MAX_TRACE_CHARS}")
    lines = _trace_lines(text, partial)
    cur = _Lines(lines)
    blocks: list[ParsedBlock] = []
    try:
        first = cur.take()
        if first != TRACE_OPEN:
            raise _Fail("wrapper", "first line must be [TRACE]")
        if not partial and lines[-1] != TRACE_CLOSE:
            raise _Fail("wrapper", "last line must be [/TRACE]")
        next_line = 0
        while True:
            tag = cur.take()
            if tag == CODE_OPEN:
                blocks.append(_code_block(cur, next_line, len(blocks)))
                next_line = blocks[-1].end + 1
            elif tag == RETURN_OPEN:
                if not blocks:
                    raise _Fail("structure", "[RETURN] before any block")
                value, answer_text = _return_group(cur, entry, known, input_text)
                return Validation(True, None, "", tuple(blocks), value, answer_text)
            else:
                raise _Fail("structure", f"line {cur.pos}: expected [CODE] or [RETURN], got {tag[:40]!r}")
    except _Fail as f:
        return Validation(False, f.reason, f.detail, tuple(blocks))
    except _Eof:
        if partial:
            return Validation(True, None, "", tuple(blocks), complete=False)
        return Validation(False, "structure", "text ended inside a group")


def _compact(text: str) -> str:
    """``text`` without white space next to ``, : [ ] { } ( )`` outside string literals, and every
    other run of white space outside them as one space; one left-to-right pass (linear).

    Two texts with the same compact form tokenize alike, so when one is a valid literal the other
    is the same literal: a LOCALS body that differs from the truth's only in such spacing is equal
    to it without being parsed. White space inside a number (``1 000``) or a string, or characters
    Python does not take for white space (``\\xa0``), survive in the compact form, so such a
    text falls back to parsing, which rejects it. A text with no compact form (a comment, a
    backslash outside strings, an unterminated string, an f-string) gets one equal to no truth's.
    """
    body = text.strip(PY_SPACE)
    try:
        spans = lex(body)
    except ValueError:
        return "\0" + text
    out: list[str] = []
    for kind, start, end in spans:
        if kind == "str":
            out.append(body[start:end])
            continue
        if kind != "code" or body.find("\\", start, end) >= 0:
            return "\0" + text
        i = start
        for m in _SPACE_RUN.finditer(body, start, end):  # body is stripped: a run has text on both sides
            out.append(body[i : m.start()])
            out.append("" if body[m.start() - 1] in _PUNCT or body[m.end()] in _PUNCT else " ")
            i = m.end()
        out.append(body[i:end])
    return "".join(out)


_compact_truth = functools.lru_cache(maxsize=16384)(_compact)


@functools.lru_cache(maxsize=16384)
def _squeeze_truth(text: str) -> str:
    """The truth's LOCALS without any white space: a cheap test before :func:`_compact`."""
    return text.translate(_NO_SPACE)


def _respaced(text: str, truth_text: str) -> bool:
    """Whether ``text`` is ``truth_text`` with only token-preserving changes of white space."""
    return text.translate(_NO_SPACE) == _squeeze_truth(truth_text) and _compact(text) == _compact_truth(truth_text)


def _literal_locals(block: ParsedBlock) -> dict[str, Any] | None:
    try:
        value = parse_literal(block.locals_text, MAX_LITERAL_CHARS)
    except ValueError:
        return None
    return value if type(value) is dict else None


def _truth_locals(pb: ParsedBlock, tb: Block) -> dict[str, Any] | None:
    """``pb``'s LOCALS read against the truth block ``tb``: the truth's own dict when the text is
    the truth's up to spacing (the fast path), else the parsed dict; ``None`` if not a dict literal."""
    if pb.locals_text == tb.locals_text or _respaced(pb.locals_text, tb.locals_text):
        return tb.locals
    return _literal_locals(pb)


def _check_truth(v: Validation, flow: Flow, partial: bool) -> Validation:
    truth = flow.blocks
    if not partial and len(v.blocks) != len(truth):
        return Validation(False, "block_count", f"{len(v.blocks)} blocks, truth has {len(truth)}", v.blocks)
    if len(v.blocks) > len(truth):
        return Validation(False, "block_count", f"more than {len(truth)} blocks", v.blocks)
    parsed = []
    for i, (pb, tb) in enumerate(zip(v.blocks, truth, strict=False)):
        if (pb.start, pb.end) != (tb.start, tb.end):
            return Validation(
                False, "block_range", f"block {i}: {pb.start}-{pb.end}, truth {tb.start}-{tb.end}", v.blocks
            )
        for k, src in enumerate(pb.code):
            if src.strip(PY_SPACE) != flow.lines[pb.start + k].strip(PY_SPACE):
                return Validation(False, "code", f"LINENO {pb.start + k} differs from the source", v.blocks)
        if len(pb.locals_text) > 4 * len(tb.locals_text) + 4096:  # bounds parsing work by the truth's size
            return Validation(False, "too_long", f"block {i}: LOCALS far longer than the truth's", v.blocks)
        loc = _truth_locals(pb, tb)
        if loc is None:
            return Validation(False, "locals", f"block {i}: LOCALS is not a dict literal", v.blocks)
        parsed.append(ParsedBlock(pb.start, pb.end, pb.code, pb.thought, pb.locals_text, loc))
    return Validation(v.ok, None, "", tuple(parsed), v.answer, v.answer_text, v.complete)


def parse_trace(text: str, entry: str | None = None) -> Validation:
    """Check every rule that needs no ground truth; LOCALS are parsed and must be dicts."""
    v = _scan(text, entry, partial=False)
    if not v.ok:
        return v
    parsed = []
    for i, pb in enumerate(v.blocks):
        loc = _literal_locals(pb)
        if loc is None:
            return Validation(False, "locals", f"block {i}: LOCALS is not a dict literal", v.blocks)
        parsed.append(ParsedBlock(pb.start, pb.end, pb.code, pb.thought, pb.locals_text, loc))
    return Validation(True, None, "", tuple(parsed), v.answer, v.answer_text)


def validate(text: str, flow: Flow) -> Validation:
    """All rules of SPEC §3 against the ground-truth ``flow``; ``ok`` is the reward's ``fmt``."""
    known = (f"assert {flow.entry}({flow.input}) == {flow.output_text}", flow.output, flow.output_text)
    v = _scan(text, flow.entry, partial=False, known=known, input_text=flow.input)
    return _check_truth(v, flow, partial=False) if v.ok else v


def prefix_score(text: str, flow: Flow, *, use_weights: bool = True) -> float:
    """DBS's intermediate PRM score of an unfinished trace: the weight of its prefix-consistent
    complete blocks (``-1.0`` when the prefix already breaks the format)."""
    from codethinker.contra.values import strict_equal

    v = _scan(text, flow.entry, partial=True)
    if v.ok:
        v = _check_truth(v, flow, partial=True)
    if not v.ok:
        return -1.0
    score = 0.0
    for pb, tb in zip(v.blocks, flow.blocks, strict=False):
        if not strict_equal(pb.locals, tb.locals):
            break
        score += tb.weight if use_weights else 1
    return score
