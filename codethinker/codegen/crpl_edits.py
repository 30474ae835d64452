"""CRPL's offline edits (docs/recode.md): rule-based clean-ups and degradations of a real reasoning text.

A :class:`Reasoning` is a teacher's response to a problem cut in two: ``think`` (the prose before and
after the code) and ``code`` (the solution). :func:`parse_response` reads one from a LeetCodeDataset
``response`` (a model-written explanation with the solution in a ```python block) and :meth:`Reasoning.render`
writes it in ReCode's response format, ``<think>...</think><answer>```python ...```</answer>``.

Each edit is a function ``(Reasoning, Context, Random) -> Reasoning | None`` (None: it does not apply),
named in :data:`CLEANUPS` (what makes ``t+``) and :data:`DEGRADATIONS` (what makes ``t-``), grouped by
the three dimensions of the paper (factual accuracy, logical rigor, logical coherence):

* clean-ups: ``drop_unsupported`` (factual: claims of efficiency/optimality/correctness with no reason
  or bound), ``verify_examples`` (rigor: the example checks the judge verified), ``drop_filler``
  (coherence: pleasantries and pointers such as "Here's the complete code:");
* degradations: ``wrong_complexity``, ``wrong_value``, ``wrong_example`` (factual); ``skip_step``,
  ``drop_justification``, ``unjustified_leap`` (rigor); ``shuffle_steps``, ``move_paragraph``,
  ``contradict_code`` (coherence). The code bug is
  :func:`codethinker.codegen.crpl_bugs.bug_candidates` (one token of the code changed; the caller keeps a
  candidate the judge fails).

>>> r = Reasoning("Sure! Use a loop.\\n\\nHere's the complete code:", "x = 1\\n")
>>> drop_filler(r, Context(()), random.Random(0)).think
'Use a loop.'
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from codethinker.codegen.answer import defines_entry

__all__ = [
    "CLEANUPS",
    "DEGRADATIONS",
    "Context",
    "Reasoning",
    "drop_filler",
    "examples",
    "parse_recode",
    "parse_response",
    "split_recode",
]

_BLOCK = re.compile(r"^[ \t]*```[ \t]*(python3?|py3?)?[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)
_STEP = re.compile(r"^ {0,3}(\d+)\.[ \t]+", re.M)
_SENT = re.compile(r"(?<=[.!?])[ \t]+(?=[A-Z`*])")
_FILLER = re.compile(
    r"^(?:(?:Certainly|Sure|Of course|Absolutely|Great)\b[^.!]*[!.]"
    r"|(?:Here(?:'s| is)|Below is)\b.*(?:code|implement\w*|solution|method|version)\b.*[:.]"
    r"|(?:I hope|Let me know|Feel free)\b.*)$",
    re.I,
)
_UNSUPPORTED = re.compile(
    r"^(?:This|The above|Overall, this|The)\s+(?:solution|approach|implementation|code|method|algorithm)\b"
    r"(?=.*\b(?:efficient|efficiently|optimal|optimally|correctly|robust)\b)(?!.*O\().*$",
    re.I,
)
_COMPLEXITIES = ("O(1)", "O(log n)", "O(n)", "O(n log n)", "O(n^2)", "O(2^n)")
_BIG_O = re.compile(r"O\([^()]*(?:\([^()]*\)[^()]*)*\)")
_NUMBER = re.compile(r"(?<![\w.^*/-])(\d{1,6})(?![\w.]|\*\*|\^|-bit)")
_JUSTIFY = re.compile(r",?\s+(?:because|since|so that|which ensures|ensuring|as this)\b[^.;:]*", re.I)
_JUSTIFY_SENT = re.compile(r"^This (?:ensures|allows|guarantees|way|is because|is necessary)\b.*$")
_LEAPS = (
    "The approach is obviously correct for every input, so there is no need to check edge cases.",
    "It is clear that this works in all cases, so no argument is needed.",
    "Edge cases cannot occur here, so the main loop handles everything.",
)


@dataclass(frozen=True)
class Reasoning:
    """A reasoning process: its prose and its code."""

    think: str
    code: str

    def render(self) -> str:
        """ReCode's response format (one ```python block inside ``<answer>``)."""
        return f"<think>\n{self.think.strip()}\n</think>\n<answer>\n```python\n{self.code.rstrip()}\n```\n</answer>"


@dataclass(frozen=True)
class Context:
    """What an edit may know besides the text: the problem's examples as (call, expected) source texts,
    true for the base code (every test passed the judge)."""

    examples: tuple[tuple[str, str], ...]


def parse_response(text: str, entry_point: str) -> Reasoning | None:
    """The reasoning of a response: its last ```python block that defines the entry point is the code,
    the text around it the prose; None when no block does or no prose is left."""
    blocks = [m for m in _BLOCK.finditer(text) if defines_entry(m.group(2), entry_point)]
    if not blocks:
        return None
    m = blocks[-1]
    think = (text[: m.start()].rstrip() + "\n\n" + text[m.end() :].strip()).strip()
    return Reasoning(think, m.group(2)) if think else None


_RECODE = re.compile(r"\A\s*<think>(.*?)</think>\s*<answer>(.*?)</answer>\s*\Z", re.S)


def split_recode(text: str) -> tuple[str, str] | None:
    """(think, answer) of a response in ReCode's format (``<think>...</think>``, then ``<answer>...</answer>``,
    nothing around them, each tag once); None when the text is not in it."""
    m = _RECODE.match(text)
    if m is None or any(text.count(t) != 1 for t in ("<think>", "</think>", "<answer>", "</answer>")):
        return None
    return m.group(1), m.group(2)


def parse_recode(text: str) -> Reasoning | None:
    """The :class:`Reasoning` of a response in ReCode's format whose answer is one ```python block."""
    parts = split_recode(text)
    blocks = [m.group(2) for m in _BLOCK.finditer(parts[1])] if parts else []
    if parts is None or len(blocks) != 1 or not parts[0].strip():
        return None
    return Reasoning(parts[0].strip(), blocks[0])


def examples(tests: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``(arguments, expected)`` of each test of the form ``assert candidate(...) == literal``."""
    out = []
    for test in tests:
        try:
            node = ast.parse(test).body[0]
        except (SyntaxError, ValueError, IndexError):
            continue
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
            continue
        cmp = node.test
        call = cmp.left
        if not (len(cmp.ops) == 1 and isinstance(cmp.ops[0], ast.Eq) and isinstance(call, ast.Call)):
            continue
        if not (isinstance(call.func, ast.Name) and call.func.id == "candidate"):
            continue
        try:
            ast.literal_eval(cmp.comparators[0])
        except (ValueError, TypeError, SyntaxError, RecursionError):
            continue
        args = ", ".join([ast.unparse(a) for a in call.args] + [ast.unparse(k) for k in call.keywords])
        out.append((args, ast.unparse(cmp.comparators[0])))
    return tuple(sorted(out, key=lambda e: (len(e[0]) + len(e[1]), e)))


# --------------------------------------------------------------------------- prose helpers


def _map_sentences(think: str, keep: Callable[[str], str | None]) -> str:
    """``think`` with each prose sentence replaced by ``keep(sentence)`` (None: removed); fenced lines,
    list markers and headings are left as they are."""
    out, fenced = [], False
    for line in think.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or line.lstrip().startswith(("```", "#")):
            out.append(line)
            continue
        m = re.match(r"^(\s*(?:[-*]|\d+\.)?\s*)(.*)$", line)
        assert m is not None
        lead, body = m.groups()
        kept = [s for s in (keep(x) for x in _SENT.split(body)) if s]
        if body and not kept:
            continue  # the whole line went
        out.append(lead + " ".join(kept))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def _steps(think: str) -> tuple[str, list[str], list[str], str] | None:
    """The longest numbered list 1., 2., ... of ``think``: (head, step bodies, separators, tail)."""
    ms, best, run = list(_STEP.finditer(think)), [], []
    for m in ms:
        run = [*run, m] if run and int(m.group(1)) == int(run[-1].group(1)) + 1 else ([m] if m.group(1) == "1" else [])
        best = run if len(run) > len(best) else best
    if len(best) < 2:
        return None
    end = re.search(r"\n\s*\n(?=\S)(?! {0,3}\d+\.)", think[best[-1].end() :])
    stop = best[-1].end() + end.start() if end else len(think)
    bounds = [m.start() for m in best] + [stop]
    bodies, seps = [], []
    for i, m in enumerate(best):
        chunk = think[m.end() : bounds[i + 1]]
        body = chunk.rstrip()
        bodies.append(body)
        seps.append(chunk[len(body) :])
    return think[: best[0].start()], bodies, seps, think[stop:]


def _with_steps(head: str, bodies: list[str], seps: list[str], tail: str) -> str:
    return head + "".join(f"{i}. {b}{s}" for i, (b, s) in enumerate(zip(bodies, seps, strict=True), 1)) + tail


def _append(think: str, text: str) -> str:
    return f"{think.rstrip()}\n\n{text}"


# --------------------------------------------------------------------------- clean-ups (t+)


def drop_filler(r: Reasoning, ctx: Context, rng: random.Random) -> Reasoning | None:
    """Coherence: remove pleasantries and pointers to the code ("Here's the complete code:")."""
    think = _map_sentences(r.think, lambda s: None if _FILLER.match(s.strip()) else s)
    return replace(r, think=think) if think != r.think.strip() and think else None


def drop_unsupported(r: Reasoning, ctx: Context, rng: random.Random) -> Reasoning | None:
    """Factual accuracy: remove claims that the solution is efficient/optimal/correct with no bound or reason."""
    think = _map_sentences(r.think, lambda s: None if _UNSUPPORTED.match(s.strip()) else s)
    return replace(r, think=think) if think != r.think.strip() and think else None


def verify_examples(r: Reasoning, ctx: Context, rng: random.Random) -> Reasoning | None:
    """Logical rigor: check the method on (at most two of) the problem's examples; true because the code
    passed every test."""
    if not ctx.examples:
        return None
    lines = [f"- `{a}` gives `{e}`, as expected." for a, e in ctx.examples[:2]]
    return replace(r, think=_append(r.think, "Checking the examples:\n" + "\n".join(lines)))


# --------------------------------------------------------------------------- degradations (t-)


def wrong_complexity(r: Reasoning, ctx: Context, rng: random.Random) -> Reasoning | None:
    """Factual accuracy: one stated complexity replaced by another class."""
    found = list(_BIG_O.finditer(r.think))
    if not found:
        return None
    m = rng.choice(found)
    other = rng.choice([c for c in _COMPLEXITIES if c.replace(" ", "") != m.group(0).replace(" ", "")])
    return replace(r, think=r.think[: m.start()] + other + r.think[m.end() :])


def wrong_value(r: Reasoning, ctx: Context, rng: random.Random) -> Reasoning | None:
    """Factual accuracy: one number of the prose (not a list marker, not in a bound) off by one."""
    prose = [m for m in _NUMBER.finditer(r.think) if not _in_fence(r.think, m.start()) and not _is_marker(r.think, m)]
    if not prose:
        return None
    m = rng.choice(prose)
    value = int(m.group(1))
    new = value + 1 if value == 0 or rng.random() < 0.5 else value - 1
    return replace(r, think=r.think[: m.start()] + str(new) + r.think[m.end() :])


def _in_fence(text: str, pos: int) -> bool:
    return text[:pos].count("```") % 2 == 1


def _is_marker(text: str, m: re.Match[str]) -> bool:
    line_start = text.rfind("\n", 0, m.start()) + 1
    return bool(re.fullmatch(r" {0,3}", text[line_start : m.start()])) and text[m.end() : m.end() + 1] == "."


def wrong_example(r: Reasoning, ctx: Context, rng: random.Random) -> Reasoning | None:
    """Factual accuracy: an example check whose expected value is wrong (the form of ``verify_examples``)."""
    for args, expected in ctx.examples[:2]:
        bad = _perturb(ast.literal_eval(expected), rng)
        if bad is not None and bad != ast.literal_eval(expected):
            line = f"- `{args}` gives `{bad!r}`, as expected."
            return replace(r, think=_append(r.think, "Checking the examples:\n" + line))
    return None


def _perturb(value: object, rng: random.Random) -> object:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + rng.choice((1, -1))
    if isinstance(value, str):
        return value[::-1] if value[::-1] != value else value + "a"
    if isinstance(value, list | tuple):
        if not value:
            return type(value)([0])
        inner = _perturb(value[0], rng)
        return type(value)([inner, *value[1:]]) if inner is not None else type(value)(value[:-1])
    return 0 if value is None else None


def skip_step(r: Reasoning, ctx: Context, rng: random.Random) -> Reasoning | None:
    """Logical rigor: one step of a numbered plan of three or more left out (the others renumbered)."""
    found = _steps(r.think)
    if found is None or len(found[1]) < 3:
        return None
    head, bodies, seps, tail = found
    i = rng.randrange(1, len(bodies))  # not the first step: the plan still starts
    kept_seps = seps[:i] + seps[i + 1 :] if i < len(bodies) - 1 else seps[: i - 1] + seps[i:]
    return replace(r, think=_with_steps(head, bodies[:i] + bodies[i + 1 :], kept_seps, tail))


def drop_justification(r: Reasoning, ctx: Context, rng: random.Random) -> Reasoning | None:
    """Logical rigor: the reasons given ("because ...", "This ensures ...") removed."""

    def keep(s: str) -> str | None:
        if _JUSTIFY_SENT.match(s.strip()):
            return None
        cut = _JUSTIFY.sub("", s)
        return cut if cut.rstrip().endswith((".", "!", "?", ":")) else cut.rstrip() + "."

    think = _map_sentences(r.think, lambda s: keep(s) if _JUSTIFY.search(s) or _JUSTIFY_SENT.match(s.strip()) else s)
    return replace(r, think=think) if think != r.think.strip() and think else None


def unjustified_leap(r: Reasoning, ctx: Context, rng: random.Random) -> Reasoning | None:
    """Logical rigor: an unsupported claim that the approach needs no argument or edge-case check."""
    return replace(r, think=_append(r.think, rng.choice(_LEAPS)))


def shuffle_steps(r: Reasoning, ctx: Context, rng: random.Random) -> Reasoning | None:
    """Logical coherence: the steps of a numbered plan put out of order (numbers kept 1, 2, ...)."""
    found = _steps(r.think)
    if found is None:
        return None
    head, bodies, seps, tail = found
    if len(set(bodies)) < 2:
        return None
    order = list(range(len(bodies)))
    while order == sorted(order):
        rng.shuffle(order)
    return replace(r, think=_with_steps(head, [bodies[i] for i in order], seps, tail))


def move_paragraph(r: Reasoning, ctx: Context, rng: random.Random) -> Reasoning | None:
    """Logical coherence: the closing paragraph (the explanation of the code) moved to the front."""
    paras = [p for p in re.split(r"\n\s*\n", r.think.strip()) if p.strip()]
    if len(paras) < 3 or _in_fence("\n\n".join(paras[:-1]), len("\n\n".join(paras[:-1]))):
        return None
    return replace(r, think="\n\n".join([paras[-1], *paras[:-1]]))


def contradict_code(r: Reasoning, ctx: Context, rng: random.Random) -> Reasoning | None:
    """Logical coherence: a statement the code contradicts (a loop, a dict/set, a sort it does use)."""
    code = r.code.split("def ", 1)[-1]
    facts = []
    if re.search(r"\b(?:for|while)\b", code):
        facts.append("The method does not need to iterate over the input; it computes the answer directly.")
    if re.search(r"\b(?:dict|set|Counter|defaultdict)\(|\{\s*\}|\{[^}]*:", code):
        facts.append("No auxiliary dictionary or set is needed: the input is processed in place.")
    if re.search(r"\bsorted\(|\.sort\(", code):
        facts.append("The input never needs to be sorted.")
    if not facts:
        return None
    return replace(r, think=_append(r.think, rng.choice(facts)))


Edit = Callable[[Reasoning, Context, random.Random], "Reasoning | None"]
CLEANUPS: dict[str, tuple[Edit, ...]] = {
    "factual": (drop_unsupported,),
    "rigor": (verify_examples,),
    "coherence": (drop_filler,),
}
DEGRADATIONS: dict[str, tuple[Edit, ...]] = {
    "factual": (wrong_complexity, wrong_value, wrong_example),
    "rigor": (skip_step, drop_justification, unjustified_leap),
    "coherence": (shuffle_steps, move_paragraph, contradict_code),
}
