"""Short synthetic programs for a learnable curriculum: small functions of 2-4 blocks with literal inputs.

A from-scratch micro model on this machine cannot learn LeetCode-length traces first (median ~2,500
characters; ``../shared/MICRO-EXPERIMENT.md``): it memorizes ~140 functions instead of learning to copy
code and inputs from the prompt. Thousands of distinct short functions make copying pay. Every program
here is plain Python over ints, lists of ints and short strings, terminates, and raises nothing on its
input by construction (the funnel's execution filter still runs them in the sandbox).

>>> progs = generate(n=2, seed=0)
>>> [p.entry for p in progs], all(p.source.startswith("def f(") for p in progs)
(['f', 'f'], True)
>>> generate(n=3, seed=7) == generate(n=3, seed=7)  # deterministic
True

``forms="cruxeval"`` adds what CRUXEval's programs do and the basic forms lack: in-place list methods
(``append``, ``insert``, ``extend``, ``reverse``, ``sort``), string methods (``replace``, ``strip``,
``find``, ``join``, ``title``, ``zfill`` ...), a character loop that builds a string and a dict that counts
characters. ``forms="basic"`` draws the same random numbers as before these forms existed, so its
programs are unchanged: the new forms draw only when they are on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

__all__ = ["FORMS", "SynthProgram", "generate", "sample_source"]

_INT_NAMES = ("a", "b", "c", "n", "k", "m", "t", "total", "count", "acc", "x0", "y", "z", "res", "val")
_LIST_NAMES = ("xs", "nums", "arr", "vals", "items", "out", "seen", "stack")
_STR_NAMES = ("s", "word", "text", "name", "w")
_DICT_NAMES = ("d", "counts", "freq", "table")
FORMS = ("basic", "cruxeval")


@dataclass(frozen=True)
class SynthProgram:
    """One generated function: ``source`` defines ``entry``; ``input`` is its call's argument text."""

    source: str
    input: str
    entry: str = "f"


class _Gen:
    def __init__(self, rng: random.Random, max_statements: int = 3, max_params: int = 2, forms: str = "basic") -> None:
        self.r = rng
        self.max_statements, self.max_params = max_statements, max_params
        self.cruxeval = forms == "cruxeval"
        self.ints: list[str] = []
        self.lists: list[str] = []  # lists of ints, never empty
        self.strs: list[str] = []
        self.dicts: list[str] = []  # never returned, never read but by the statement that fills them

    def fresh(self, pool: tuple[str, ...]) -> str:
        used = set(self.ints) | set(self.lists) | set(self.strs) | set(self.dicts)
        free = [v for v in pool if v not in used]
        return self.r.choice(free) if free else self.r.choice(pool) + str(self.r.randint(1, 9))

    def int_expr(self) -> str:
        r, c = self.r, self.r.randint(1, 9)
        a = r.choice(self.ints) if self.ints else str(c)
        b = r.choice(self.ints) if self.ints else str(r.randint(1, 9))
        forms = [f"{a} + {c}", f"{a} * {c}", f"{a} - {b}", f"{a} // {c}", f"{a} % {c + 1}", f"max({a}, {b})"]
        forms += [f"min({a}, {c})", f"abs({a} - {b})", f"{a} + {b}"]
        if self.lists:
            xs = r.choice(self.lists)
            forms += [f"len({xs})", f"sum({xs})", f"{xs}[0]", f"{xs}[-1]", f"max({xs})", f"{xs}.count({c % 4})"]
        if self.strs:
            s = r.choice(self.strs)
            forms += [f"len({s})", f"{s}.count('{r.choice('aeiou')}')"]
        return r.choice(forms)

    def list_expr(self) -> str:
        r = self.r
        xs = r.choice(self.lists)
        c = r.randint(1, 5)
        forms = [f"sorted({xs})", f"{xs}[::-1]", f"{xs} + [{c}]", f"[v * {c} for v in {xs}]"]
        forms += [f"[v + {c} for v in {xs}]", f"{xs}[1:] + {xs}[:1]", f"sorted({xs}, reverse=True)"]
        return r.choice(forms)

    def str_expr(self) -> str:
        s = self.r.choice(self.strs)
        return self.r.choice([f"{s}.upper()", f"{s}[::-1]", f"{s} + '{self.r.choice('xyz')}'", f"{s} * 2"])

    def statement(self) -> list[str]:
        r = self.r
        kinds = ["assign", "assign", "if", "for", "while"] + (["list", "str"] if self.lists else ["str"])
        if self.cruxeval:
            kinds += ["method", "method"] + (["strloop", "strcount"] if self.strs else [])
        kind = r.choice(kinds)
        if kind == "str" and not self.strs:
            kind = "assign"
        if kind in ("method", "strloop", "strcount"):
            return self.cruxeval_statement(kind)
        if kind == "assign":
            v = self.fresh(_INT_NAMES)
            line = [f"{v} = {self.int_expr()}"]
            self.ints.append(v)
            return line
        if kind == "list":
            v = self.fresh(_LIST_NAMES)
            line = [f"{v} = {self.list_expr()}"]
            self.lists.append(v)
            return line
        if kind == "str":
            v = self.fresh(_STR_NAMES)
            line = [f"{v} = {self.str_expr()}"]
            self.strs.append(v)
            return line
        if kind == "if":
            v = self.ints[-1] if self.ints and r.random() < 0.5 else self.fresh(_INT_NAMES)
            cond_var = r.choice(self.ints) if self.ints else None
            cond = f"{cond_var} > {r.randint(0, 9)}" if cond_var else f"{r.randint(0, 3)} < {r.randint(0, 3)}"
            then, other = self.int_expr(), self.int_expr()
            if v not in self.ints:
                self.ints.append(v)
            return [f"if {cond}:", f"    {v} = {then}", "else:", f"    {v} = {other}"]
        if kind == "for":
            acc = self.fresh(_INT_NAMES)
            src = r.choice(self.lists) if self.lists and r.random() < 0.7 else f"range({r.randint(2, 5)})"
            body = r.choice([f"{acc} += i", f"{acc} = {acc} * 2 + i", f"{acc} += i % 3"])
            lines = [f"{acc} = {r.randint(0, 3)}", f"for i in {src}:"]
            if r.random() < 0.4:
                lines += [f"    if i % 2 == {r.randint(0, 1)}:", f"        {body}"]
            else:
                lines += [f"    {body}"]
            self.ints.append(acc)
            return lines
        v = self.fresh(_INT_NAMES)  # while: a bounded countdown
        start, step = r.randint(3, 12), r.randint(1, 3)
        self.ints.append(v)
        return [f"{v} = {start}", f"while {v} > {r.randint(0, 2)}:", f"    {v} -= {step}"]

    def cruxeval_statement(self, kind: str) -> list[str]:
        """A statement of CRUXEval's kinds: a list or string method, a loop building a string, a dict count."""
        r = self.r
        if kind == "strloop":
            s, v = r.choice(self.strs), self.fresh(_STR_NAMES)
            test = r.choice(["ch in 'aeiou'", "ch.isalpha()", f"ch != '{r.choice('abcde')}'"])
            then = r.choice(["ch.upper()", "ch * 2", f"'{r.choice('xyz')}'"])
            self.strs.append(v)
            return [
                f"{v} = ''",
                f"for ch in {s}:",
                f"    if {test}:",
                f"        {v} += {then}",
                "    else:",
                f"        {v} += ch",
            ]
        if kind == "strcount":
            s, d, v = r.choice(self.strs), self.fresh(_DICT_NAMES), self.fresh(_INT_NAMES)
            self.dicts.append(d)
            self.ints.append(v)
            out = r.choice([f"len({d})", f"max({d}.values()) if {d} else 0", f"{d}.get('{r.choice('aeiou')}', 0)"])
            return [f"{d} = {{}}", f"for ch in {s}:", f"    {d}[ch] = {d}.get(ch, 0) + 1", f"{v} = {out}"]
        c = r.randint(0, 9)
        forms: list[tuple[str, str]] = []  # (what it assigns: "" for an in-place call, "int", "str", "list"; its text)
        if self.lists:
            xs = r.choice(self.lists)
            forms += [
                ("", f"{xs}.append({self.int_expr()})"),
                ("", f"{xs}.insert(0, {c})"),
                ("", f"{xs}.extend([{c}, {c + 1}])"),
                ("", f"{xs}.reverse()"),
                ("", f"{xs}.sort()"),
                ("", f"{xs}.sort(reverse=True)"),
            ]
        if self.strs:
            s = r.choice(self.strs)
            a, b = r.choice("abcdeiou"), r.choice("xyz")
            forms += [
                ("str", m)
                for m in (
                    f"{s}.replace('{a}', '{b}')",
                    f"{s}.strip('{a}')",
                    f"{s}.title()",
                    f"{s}.swapcase()",
                    f"'-'.join({s})",
                    f"{s}.zfill(6)",
                    f"{s}.capitalize()",
                    f"{s}.lstrip('{a}') + {s}.rstrip('{a}')",
                )
            ]
            forms += [("int", m) for m in (f"{s}.find('{a}')", f"{s}.rfind('{a}')", f"len({s}.split('{a}'))")]
            if self.lists:
                forms += [
                    ("str", f"''.join(str(v) for v in {r.choice(self.lists)})"),
                    ("list", f"[ord(ch) % 10 for ch in {s}] + [{c}]"),
                ]
        if not forms:  # ints only: a plain assignment
            v = self.fresh(_INT_NAMES)
            line = f"{v} = {self.int_expr()}"
            self.ints.append(v)
            return [line]
        target, text = r.choice(forms)
        if not target:
            return [text]
        pool, names = {
            "int": (self.ints, _INT_NAMES),
            "str": (self.strs, _STR_NAMES),
            "list": (self.lists, _LIST_NAMES),
        }[target]
        v = self.fresh(names)
        pool.append(v)
        return [f"{v} = {text}"]

    def program(self) -> SynthProgram:
        r = self.r
        params, args = [], []
        for _ in range(r.randint(1, self.max_params)):
            kind = r.choice(["int", "list", "str"])
            if kind == "int":
                v = self.fresh(_INT_NAMES)
                self.ints.append(v)
                args.append(str(r.randint(0, 20)))
            elif kind == "list":
                v = self.fresh(_LIST_NAMES)
                self.lists.append(v)
                args.append(repr([r.randint(0, 9) for _ in range(r.randint(2, 5))]))
            else:
                v = self.fresh(_STR_NAMES)
                self.strs.append(v)
                args.append(repr("".join(r.choice("abcdeiou") for _ in range(r.randint(2, 5)))))
            params.append(v)
        body: list[str] = []
        for _ in range(r.randint(1, self.max_statements)):
            body += self.statement()
        pool = self.ints + self.lists + self.strs
        ret = r.choice(pool[len(params) :] or pool)
        lines = [f"def f({', '.join(params)}):"] + ["    " + ln for ln in body] + [f"    return {ret}"]
        return SynthProgram("\n".join(lines) + "\n", ", ".join(args))


def generate(
    n: int, seed: int = 0, max_statements: int = 3, max_params: int = 2, forms: str = "basic"
) -> list[SynthProgram]:
    """``n`` distinct programs (by source and input), deterministic in ``seed``.

    Each has 1..``max_params`` parameters and 1..``max_statements`` generated statements (an
    ``if``/``else``, ``for`` or ``while`` statement counts as one) before its ``return``; ``forms``:
    ``basic`` or ``cruxeval`` (the module's docstring).
    """
    if max_statements < 1 or max_params < 1:
        raise ValueError("max_statements and max_params must be >= 1")
    if forms not in FORMS:
        raise ValueError(f"forms must be one of {', '.join(FORMS)}, got {forms!r}")
    rng = random.Random(seed)
    out: list[SynthProgram] = []
    seen: set[tuple[str, str]] = set()
    tries = 0
    while len(out) < n and tries < 50 * n + 100:
        tries += 1
        prog = _Gen(rng, max_statements, max_params, forms).program()
        if (prog.source, prog.input) not in seen:
            seen.add((prog.source, prog.input))
            out.append(prog)
    return out


def sample_source(sample: dict[str, Any]) -> str:
    """``synth`` for a generated program's sample (task id ``synth/...``, the synth stage's), else ``leetcode``."""
    return "synth" if str(sample["task_id"]).startswith("synth/") else "leetcode"
