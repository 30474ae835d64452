"""CRUXEval-X output prediction (Xu et al. 2024): CRUXEval's programs in 19 languages, one task each.

Prompt: a record as CRUXEval-X shows it, the program up to its check (``code`` cut where the
check begins) and then ``output_reasoning``, the check with the expected output replaced by ``????``,
under CRUXEval-X's output instruction ("complete the ``????``... with the output") in the project's
zero-shot [THOUGHT]/[ANSWER] form (CRUXEval-X prompts 3-shot, with the literal alone as the answer).

Answer: the literal in the last ``[ANSWER]`` group, in the language's syntax (a copy of the whole
check line is read too: the literal is what stands between its two sides). Guard, before anything
runs (else ``no_answer`` with the reason): at most 4000 characters; brackets balanced outside
string literals; no newline, ``;`` (Racket: none; Rust: only in ``[x; n]``) or comment opener
outside string literals, so a literal spans lines only inside a string; no interpolating or
command-substituting string (``${``, ``#{``, ``\\(``, ``$"``, ``f"``, backticks...); no
process-control word (``exit``, ``system``, ``fork``, ``open``...) outside strings; bash: one shell
word, nothing outside quotes but ``[A-Za-z0-9_.,:+=@%/-]``. The literal then goes in parentheses
(not in Racket or bash), so it is one operand of the check.

Judging (MultiPL-E's rule, which CRUXEval-X uses): the literal replaces ``????``, the program is
compiled where the language is and run by :mod:`codethinker.evaluation.multilingual_runner`; it
passes when it exits 0, i.e. its assertion held. Statuses: ``pass``, ``fail`` (ran, exited
non-zero), ``timeout`` (5 s a run, 60 s a compile), ``error`` (did not compile), ``no_answer``.
Identical programs run once. Each compile and run is a bubblewrap sandbox (no network, host
read-only, an unprivileged uid and ``prlimit`` limits as root; the runner's docstring has the
details). Not covered: a literal that is itself a program calling an exit function under a name the
guard does not know.

Runtimes: ``unavailable()`` says ``runtime missing: ...`` where the compiler/interpreter is not on
PATH or cannot start in the sandbox. This machine (Debian 12) runs C++, Java, Rust, JavaScript, Bash
and Python (Perl lacks Test::Deep). Four references depend on hash order that changes run to run
(Rust's HashMap: 6, 135, 627; Java's ``Map.of``: 71) and pass or fail by chance.

>>> literal("[ANSWER]\\nassert f(1) == [1, 2]\\n[/ANSWER]", "assert f(1) ==", "")
'[1, 2]'
>>> guard(LANGS["cpp"], '1)) || true || ((1'), guard(LANGS["py"], "'a;b'")
('unbalanced brackets', None)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from codethinker.contra.render import ANSWER_CLOSE, ANSWER_OPEN, last_group
from codethinker.evaluation.multilingual_runner import (  # re-exported: the tests and callers use them from here
    _CACHE,  # also holds unavailable()'s probes
    _CACHE_LOCK,
    LANGS,
    Lang,
    Runner,
    execute,
    make_runner,
    resolve_tool,
)
from codethinker.evaluation.task import Item, Verdict, register
from codethinker.sandbox import bwrap as bw

__all__ = ["LANGS", "CRUXEvalX", "Lang", "Runner", "data_path", "execute", "fill", "guard", "literal", "split_record"]

MAX_ANSWER_CHARS = 4000

PROMPT = """Based on the given {display} code, complete the "????" in the check with the output when \
executing the code on the given test case, written as a {display} literal (no unsimplified \
expressions, no function calls). Think step by step inside [THOUGHT] and [/THOUGHT], then give only \
the literal that replaces "????" inside [ANSWER] and [/ANSWER].

```{key}
{program}
```
"""

_BAD_WORDS = re.compile(
    r"\b(exit|_exit|_Exit|quick_exit|abort|halt|die|kill|fork|spawn|system|exec\w*|popen|eval|__import__|process|"
    r"Process|Runtime|Environment|os|syscall|unsafe|socket|open|require|import|include\w*)\b"
)


def data_path(lang: str, mirror: Path | None, cache_dir: Path) -> Path:
    """The local ``<lang>.jsonl``: the pinned source through :mod:`codethinker.data.sources` where it
    lists ``cruxeval-x/<lang>``, else the mirror's ``cruxeval-x/cruxeval_preprocessed/<lang>.jsonl``."""
    from codethinker.data import sources

    if f"cruxeval-x/{lang}" in sources.SOURCES:
        return sources.resolve(sources.SOURCES[f"cruxeval-x/{lang}"], mirror, cache_dir)[0]
    path = (mirror or Path("/nonexistent")) / f"cruxeval-x/cruxeval_preprocessed/{lang}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"CRUXEval-X {lang}: {path} is absent (set base.mirror)")
    return path


def split_record(code: str, check: str, stop: str = "") -> tuple[str, str | None]:
    """``(the program with ????, the expected literal)``: ``code`` ends as ``check`` (the record's
    ``output_reasoning``) with the literal for ``????``; None where the record's check differs."""
    pre, suf = check.split("????", 1)
    k = code.rfind(pre)
    if k >= 0 and code.endswith(suf) and k + len(pre) <= len(code) - len(suf):
        return code[:k] + check, code[k + len(pre) : len(code) - len(suf)]
    k = code.find(stop or check.split("\n", 1)[0])
    return code[: max(k, 0)] + check, None


def literal(text: str, pre: str = "", suf: str = "") -> str | None:
    """The literal in the last ``[ANSWER]`` group (code fences dropped; a whole check line ``pre``
    LITERAL ``suf`` is read between its sides, whitespace aside), or None."""
    body = last_group(text, ANSWER_OPEN, ANSWER_CLOSE)  # the cap applies after the fences go
    if body is None:
        return None
    body = re.sub(r"^```[\w+#-]*\n?|\n?```$", "", body).strip()
    if not body or len(body) > MAX_ANSWER_CHARS:
        return None
    if pre.strip():
        ws = lambda s: r"\s*".join(re.escape(c) for c in s if not c.isspace())  # noqa: E731
        m = re.fullmatch(ws(pre) + r"\s*(.*?)\s*" + ws(suf), body, re.S)
        if m and m.group(1):
            return m.group(1)
    return body


def _string_end(s: str, i: int, raw: bool) -> int:
    """The index of the quote that closes the string literal opened at ``s[i]``, or -1."""
    j = i + 1
    while j < len(s):
        if s[j] == "\\" and not raw:
            j += 2
        elif s[j] == s[i]:
            return j
        else:
            j += 1
    return -1


def guard(lang: Lang, lit: str) -> str | None:
    """Why ``lit`` is refused as a literal of ``lang`` (the module docstring lists the rules), or None."""
    if not lit.strip() or len(lit) > MAX_ANSWER_CHARS:
        return "empty or too long"
    if any(f in lit for f in lang.forbid):
        return "string interpolation or substitution"
    stack, outside, i = [], [], 0
    while i < len(lit):
        c = lit[i]
        if lang.key == "rkt" and lit.startswith("#\\", i):  # a character, #\( included
            i += 3
            continue
        if c in lang.quotes:
            j = i
            while j and (lit[j - 1].isalnum() or lit[j - 1] in "_$@"):
                j -= 1
            if lang.interp and re.fullmatch(lang.interp, lit[j:i]):
                return "string interpolation or substitution"
            i = _string_end(lit, i, c in lang.raw) + 1
            if i == 0:
                return "unterminated string literal"
            outside.append("\0")  # a string literal
            continue
        if c == "\n" or (c == ";" and lang.key != "rkt" and not (lang.key == "rs" and stack[-1:] == ["["])):
            return "newline or statement separator outside a string literal"
        if any(lit.startswith(m, i) for m in lang.comments):
            return "comment outside a string literal"
        if c in "([{":
            stack.append(c)
        elif c in ")]}" and (not stack or "([{"[")]}".index(c)] != stack.pop()):
            return "unbalanced brackets"
        outside.append(c)
        i += 1
    rest = "".join(outside)
    if stack:
        return "unbalanced brackets"
    if lang.key == "sh" and not re.fullmatch(r"[\0\w.,:+=@%/-]*", rest, re.A):
        return "not one shell word (operator, glob, expansion or space outside quotes)"
    return "process-control word outside a string literal" if _BAD_WORDS.search(rest) else None


def fill(lang: Lang, program: str, lit: str) -> str:
    """The check program with ``lit`` in the place of ``????``."""
    return program.replace("????", lit if lang.key in ("rkt", "sh") else f"({lit})", 1)


class CRUXEvalX:
    """CRUXEval-X output prediction in one language (``sample_<id>``; the dataset's literal is the reference)."""

    group, stop = "multilingual", (ANSWER_CLOSE,)

    def __init__(self, lang: str, timeout_s: float = 5.0, compile_timeout_s: float = 60.0, workers: int | None = None):
        self.lang = LANGS[lang]
        self.name, self.display = f"cruxeval-x-{lang}", f"CRUXEval-X {self.lang.display}"
        self.timeout_s, self.compile_timeout_s = timeout_s, compile_timeout_s
        self.workers = max(1, min(workers or os.cpu_count() or 1, 256))

    def load(self, mirror: Path | None, cache_dir: Path) -> list[Item]:
        from codethinker.data.io import iter_jsonl

        items = []
        path = data_path(self.lang.key, mirror, cache_dir)
        for rec in iter_jsonl(path, {"id": int, "code": str, "output_reasoning": str}):
            program, expected = split_record(rec["code"], rec["output_reasoning"], self.lang.stop)
            pre, suf = next(ln for ln in program.splitlines() if "????" in ln).split("????", 1)
            prompt = PROMPT.format(display=self.lang.display, key=self.lang.key, program=program.strip("\n"))
            ref = {"program": program, "expected": expected, "pre": pre.strip(), "suf": suf.strip()}
            items.append(Item(f"sample_{rec['id']}", [{"role": "user", "content": prompt}], ref))
        return items

    def reference_text(self, item: Item) -> str:
        return f"{ANSWER_OPEN}\n{item.reference['expected'] or ''}\n{ANSWER_CLOSE}"

    def runner(self) -> Runner:
        """The language's runner (its tool resolved, its one-off setup done)."""
        return make_runner(self.lang, self.workers, self.timeout_s, self.compile_timeout_s)

    def unavailable(self) -> str | None:
        with _CACHE_LOCK:
            if f"probe:{self.lang.key}" not in _CACHE:
                _CACHE[f"probe:{self.lang.key}"] = self.probe()
            return _CACHE[f"probe:{self.lang.key}"]  # type: ignore[return-value]

    def probe(self) -> str | None:
        """Why this language cannot be judged here (uncached), or None."""
        if not bw.bwrap_available():
            return "runtime missing: bwrap (bubblewrap cannot start a sandbox here)"
        if resolve_tool(self.lang) is None:
            return f"runtime missing: {' or '.join(self.lang.tools)}"
        if missing := [n for n in self.lang.needs if shutil.which(n) is None]:
            return f"runtime missing: {', '.join(missing)}"
        try:
            r = self.runner()
            with tempfile.TemporaryDirectory() as d:
                os.chmod(d, 0o755)
                s = r.step(r.argv(self.lang.probe), d, compiling=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"runtime missing: setting up {self.lang.display} failed ({exc})"
        if s.rc != 0 or s.timed_out:
            first = "".join((s.err or s.out).strip().splitlines()[:1])[:90]
            return f"runtime missing: `{' '.join([Path(r.tool).name, *self.lang.probe[1:]])}` fails here ({first})"
        return None

    def judge(self, items: Sequence[Item], texts: Sequence[str]) -> list[Verdict]:
        if why := self.unavailable():
            return [Verdict(False, "runtime missing", why) for _ in items]
        out: dict[int, Verdict] = {}
        programs: dict[str, list[int]] = {}  # identical programs run once
        for i, (it, text) in enumerate(zip(items, texts, strict=True)):
            lit = literal(text, it.reference["pre"], it.reference["suf"])
            if why := "no literal in [ANSWER]" if lit is None else guard(self.lang, lit):
                out[i] = Verdict(False, "no_answer", why)
            else:
                programs.setdefault(fill(self.lang, it.reference["program"], lit), []).append(i)
        if programs:
            for verdict, idx in zip(execute(self.runner(), list(programs)), programs.values(), strict=True):
                out.update(dict.fromkeys(idx, verdict))
        return [out[i] for i in range(len(items))]


for _key in LANGS:
    register(f"cruxeval-x-{_key}")(lambda key=_key: CRUXEvalX(key))
