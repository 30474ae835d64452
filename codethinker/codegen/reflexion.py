"""ReflexiCoder's response format (docs/reflexicoder.md): reason, answer, then reflect and revise.

A response is, with only whitespace between and around the sections::

    <think>reasoning</think>
    <answer>```python ... ```</answer>            the first answer (cycle 0)
    <reflection>critique</reflection>             one or more reflection + revised-answer pairs
    <answer>```python ... ```</answer>

* :func:`render_response` writes one; :data:`FORMAT_PROMPT` tells a policy to write one (in the
  project's own words, after the public system prompt's layout).
* :func:`parse_response` reads one strictly: a :class:`Trajectory` with the program of each answer (as
  :func:`codethinker.codegen.answer.extract_program` reads it) and the number of reflection cycles
  ``n``, or ``ok=False`` with the first reason in :data:`REASONS` (the format reward ``F = 0``).

Strictness (the readings are in docs/reflexicoder.md): the six tags are exact and case-sensitive and
any near-tag (``<Answer>``, ``< /think >``, ``<answer/>``) is ``malformed_tag``; sections do not nest;
text outside the sections is ``text_outside_tags``; every section has non-blank text; at least one
reflection (``n >= 1``, as in the public code); every answer holds a fenced block tagged Python, its
fences closed, and a non-blank program. A reflection's ``STATUS:`` line (``BUG_DETECTED`` /
``OPTIMIZATION_ONLY``) is read (:attr:`Trajectory.statuses`) but not required. Parsing is linear in
the length of the text.

>>> t = parse_response(render_response("plan", ["x = 1\\n", "x = 2\\n"], ["STATUS: BUG_DETECTED\\nfix"]))
>>> t.ok, t.cycles, t.programs, t.statuses
(True, 1, ('x = 1\\n', 'x = 2\\n'), ('BUG_DETECTED',))
>>> parse_response("<think>plan</think><answer>```python\\nx = 1\\n```</answer>").reason
'no_reflection'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from codethinker.codegen.answer import extract_program
from codethinker.evaluation.codegen import PY_TAGS, fenced_blocks

__all__ = ["FORMAT_PROMPT", "REASONS", "STATUSES", "TAGS", "Trajectory", "parse_response", "render_response"]

TAGS = ("think", "answer", "reflection")
STATUSES = ("BUG_DETECTED", "OPTIMIZATION_ONLY")
REASONS = (
    "empty",  # nothing but whitespace
    "malformed_tag",  # a near-tag: other case, inner spaces, self-closing
    "text_outside_tags",  # non-blank text before, between or after the sections
    "no_think",  # the first section is not <think>
    "nested_tag",  # a section opened inside another
    "stray_close_tag",  # a closing tag with no open section
    "mismatched_tag",  # a section closed by another section's tag
    "unclosed_tag",  # the text ends inside a section
    "bad_order",  # a second <think>, two answers or two reflections in a row
    "no_answer",  # <think> and nothing else
    "no_reflection",  # <think><answer> only: n = 0
    "no_revised_answer",  # the last section is a reflection
    "empty_section",  # a section with only whitespace
    "unclosed_fence",  # an answer with an odd number of fence lines
    "no_code",  # an answer without a non-blank fenced Python block
)

FORMAT_PROMPT = """\
Solve the task in this exact layout and write nothing outside the tags.
<think>
Your reasoning: what is asked, the algorithm, the edge cases.
</think>
<answer>
Your first solution, in one ```python fenced block.
</answer>
<reflection>
STATUS: BUG_DETECTED or STATUS: OPTIMIZATION_ONLY
Check the last answer: name each bug and its fix, or the optimization and why it keeps the output right.
</reflection>
<answer>
The corrected or optimized solution, in one ```python fenced block.
</answer>
Repeat reflection + answer while bugs remain; stop after an optimization; write at most 5 answers."""

_EXACT = re.compile(r"<(/?)(think|answer|reflection)>")
_NEAR = re.compile(r"<\s*/?\s*(?:think|answer|reflection)\s*/?\s*>", re.IGNORECASE)
_FENCE_LINE = re.compile(r"[ \t]*```[ \t]*[\w+.-]*[ \t]*")  # a whole line that opens or closes a block
_STATUS = re.compile(r"STATUS:\s*(BUG_DETECTED|OPTIMIZATION_ONLY)\b")
_PY = PY_TAGS - {""}  # the tags that name Python (an untagged block alone does not count)


@dataclass(frozen=True)
class Trajectory:
    """One parsed response: ``ok`` (F = 1) or the ``reason`` it is broken (F = 0; the rest empty).

    ``programs``: the program of each answer in order (``r_0 .. r_n`` score these); ``reflections``:
    the text of each reflection; ``think``: the reasoning.
    """

    ok: bool
    reason: str | None = None
    think: str = ""
    programs: tuple[str, ...] = ()
    reflections: tuple[str, ...] = ()

    @property
    def cycles(self) -> int:
        """``n``: the number of reflection + revised-answer pairs (0 when broken)."""
        return len(self.reflections)

    @property
    def statuses(self) -> tuple[str | None, ...]:
        """Each reflection's ``STATUS`` (see :data:`STATUSES`) from its first non-blank line, else None."""
        out = []
        for text in self.reflections:
            first = text.strip().split("\n", 1)[0]
            m = _STATUS.match(first.strip())
            out.append(m.group(1) if m else None)
        return tuple(out)


def render_response(think: str, programs: Sequence[str], reflections: Sequence[str]) -> str:
    """The response with this reasoning, these answers' programs and the reflections between them
    (``len(programs) == len(reflections) + 1``; ``ValueError`` otherwise)."""
    if len(programs) != len(reflections) + 1:
        raise ValueError(f"{len(programs)} programs need {len(programs) - 1} reflections, got {len(reflections)}")

    def answer(code: str) -> str:
        return f"<answer>\n```python\n{code.rstrip()}\n```\n</answer>"

    parts = [f"<think>\n{think}\n</think>", answer(programs[0])]
    for note, code in zip(reflections, programs[1:], strict=True):
        parts += [f"<reflection>\n{note}\n</reflection>", answer(code)]
    return "\n".join(parts)


def _sections(text: str) -> tuple[list[tuple[str, str]], str | None]:
    """The (tag, body) sections of ``text`` in order, or the first reason they are not well formed."""
    for m in _NEAR.finditer(text):
        if not _EXACT.fullmatch(m.group()):
            return [], "malformed_tag"
    out: list[tuple[str, str]] = []
    pos, open_tag, open_end = 0, None, 0
    for m in _EXACT.finditer(text):
        closing, tag = m.group(1) == "/", m.group(2)
        if open_tag is None:
            if closing:
                return [], "stray_close_tag"
            if text[pos : m.start()].strip():
                return [], "text_outside_tags"
            if not out and tag != "think":
                return [], "no_think"
            open_tag, open_end = tag, m.end()
        elif not closing:
            return [], "nested_tag"
        elif tag != open_tag:
            return [], "mismatched_tag"
        else:
            out.append((tag, text[open_end : m.start()]))
            open_tag, pos = None, m.end()
    if open_tag is not None:
        return [], "unclosed_tag"
    if text[pos:].strip():
        return [], "text_outside_tags"
    return out, None


def _order(tags: Sequence[str]) -> str | None:
    """Why the section tags are not ``think, answer, (reflection, answer)+`` (None when they are)."""
    if not tags or tags[0] != "think":
        return "no_think"
    for k, tag in enumerate(tags[1:], 1):
        if tag != ("answer" if k % 2 else "reflection"):
            return "bad_order"
    if len(tags) == 1:
        return "no_answer"
    if len(tags) == 2:
        return "no_reflection"
    return "no_revised_answer" if tags[-1] == "reflection" else None


def _program(body: str) -> tuple[str, str | None]:
    """The program of one answer's text, or the reason it has none."""
    if sum(_FENCE_LINE.fullmatch(line) is not None for line in body.splitlines()) % 2:
        return "", "unclosed_fence"
    if not any(tag in _PY and code.strip() for tag, code in fenced_blocks(body)):
        return "", "no_code"
    code = extract_program(body)
    return (code, None) if code.strip() else ("", "no_code")


def parse_response(text: str) -> Trajectory:
    """The :class:`Trajectory` of ``text`` (never raises for any ``str``; see the module docstring)."""
    if not text.strip():
        return Trajectory(False, "empty")
    sections, why = _sections(text)
    why = why or _order([tag for tag, _ in sections])
    if why is None and any(not body.strip() for _, body in sections):
        why = "empty_section"
    if why is not None:
        return Trajectory(False, why)
    programs = []
    for tag, body in sections:
        if tag == "answer":
            code, why = _program(body)
            if why is not None:
                return Trajectory(False, why)
            programs.append(code)
    notes = tuple(body.strip() for tag, body in sections if tag == "reflection")
    return Trajectory(True, None, sections[0][1].strip(), tuple(programs), notes)
