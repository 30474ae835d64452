"""REval's answer readers and scoring (``_postprocess`` and ``_update_metrics`` of REval's tasks), for
:mod:`codethinker.evaluation.reval_tasks`.

Every answer is the text after the first ``[ANSWER]`` and before ``[/ANSWER`` (the format the prompts of
:mod:`codethinker.evaluation.reval_prompts` ask for); a chain-of-thought answer without ``[/THOUGHT]`` is
no answer (C reads it NO, which is right for a line not run).

* C (:func:`read_coverage`): YES / NO in the answer's first three letters.
* P (:func:`read_path`, :func:`path_lines`): the first answer line, stripped, is matched against every
  stripped code line; right when any matching line number is a next line (``-1``: none).
* S (:func:`read_state`, :func:`state_matches`): ``Nil`` matches Nil; else the type (``<class '..'>``
  unwrapped, generics dropped, lower-cased, string/integer fixed, a comma or "tuple" means tuple) must be
  one of the actual values' types and the value of that type, equal to one of them (floats within
  1e-6). REval ``eval``s the value; here it is parsed as a literal
  (:func:`codethinker.contra.values.parse_literal`) plus ``bytearray(..)``, ``frozenset(..)``,
  ``set(..)``, ``np.array(..)``, ``np.float64(..)`` (nothing runs); a ``str`` value that is no literal is
  the raw text, as in REval; ``datetime.datetime`` values go through ``dateutil``; type names outside
  builtins, ``collections.deque``, ``datetime.datetime``, ``numpy.ndarray``/``float64`` are no answer (no
  actual value has another type). :func:`state_text` writes an answer the reader accepts (the oracle).
* CO (:func:`answer_source`): the answer (padded in front with question lines when shorter, refused for
  ``assert True``-like text or fewer ``assert``s than the question) becomes the body of a method of the
  test class (REval's ``create_from_answer``: lines tab-indented outside triple-quoted blocks, ``assert``
  -> ``self.assert``); it must be exactly that method (code outside it is refused here). Whether it
  passes is decided in the sandbox (:mod:`codethinker.evaluation.reval_runner`, mode ``answer``).

Answers are untrusted: the readers parse, never evaluate, and bound what they read
(:data:`MAX_ANSWER_CHARS`, the size of a constructed set or bytearray).
"""

from __future__ import annotations

import ast
import builtins
import re
from typing import Any

PENALTY = ("assertTrue(True)", "assertFalse(False)", "assert True", "assert False")  # penalty_pattern
MAX_ANSWER_CHARS = 20_000
NIL = "Nil"
_VIEW_KEYS = frozenset({"collections.deque", "datetime.datetime", "numpy.ndarray", "numpy.float64", "type"})
_BUILTIN_TYPES = frozenset(k for k, v in vars(builtins).items() if isinstance(v, type))  # what locate() finds


def _answer_part(text: str) -> str:
    """REval's cut: after the first ``[ANSWER]`` (stripped), before the first ``[/ANSWER`` (stripped)."""
    k = text.find("[ANSWER]")
    if k != -1:
        text = text[k + 8 :].strip()
    k = text.find("[/ANSWER")
    return text[:k].strip() if k != -1 else text


def read_coverage(text: str) -> bool | None:
    """``Coverage._postprocess``: True for YES, False for NO, None for no answer (REval reads NO)."""
    ans = text.upper().strip()
    if "[/THOUGHT]" not in ans or not (ans := _answer_part(ans)):
        return None
    yes, no = "YES" in ans[:3], "NO" in ans[:3]
    return None if yes == no else yes


def read_path(text: str) -> int | str:
    """``Path._postprocess``: the first answer line, stripped; -1 for ``-1``, -2 for no answer."""
    if "[/THOUGHT]" not in text:
        return -2
    first = _answer_part(text).split("\n")[0].strip()
    return -2 if not first else -1 if first == "-1" else first


def path_lines(ans: int | str, code: str) -> list[int]:
    """The line numbers an answer names: every line whose stripped text it is (REval), else [-2]."""
    if isinstance(ans, int):
        return [ans]
    return [n for n, x in enumerate(code.split("\n"), 1) if x.strip() == ans] or [-2]


def _byte_array(x: Any) -> bytearray:
    if type(x) is bytes or (type(x) is list and all(type(b) is int and 0 <= b < 256 for b in x)):
        return bytearray(x)
    raise TypeError("bytearray of bytes or of a list of byte values only")


def _collection(make: Any) -> Any:
    def build(x: Any) -> Any:
        if len(x) > 1000:  # no hash flooding through a constructor
            raise TypeError("too many members")
        return make(x)

    return build


_CALLS: dict[str, Any] = {  # calls REval's eval would run, of one literal
    "bytearray": _byte_array,
    "set": _collection(set),
    "frozenset": _collection(frozenset),
    "np.array": lambda x: x,
    "numpy.array": lambda x: x,
    "np.float64": float,
    "numpy.float64": float,
}


def _literal(text: str) -> Any:
    """A literal, or one of :data:`_CALLS` on a literal; ValueError for anything else (nothing runs)."""
    from codethinker.contra.values import check_numbers, literal_from_node, parse_literal

    try:
        return parse_literal(text)
    except ValueError:
        check_numbers(text)
    try:
        node = ast.parse(text.strip(), mode="eval").body
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                name = f"{node.func.value.id}.{node.func.attr}"
            if name in _CALLS:
                return _CALLS[name](literal_from_node(node.args[0]))
    except (SyntaxError, TypeError, RecursionError, MemoryError, OverflowError):
        pass
    raise ValueError("not a literal")


def _type_name(t: str) -> str:
    """REval's fixes of the type: ``<class 'x'>`` -> x, generics dropped, string/integer, tuples."""
    if m := re.match(r"<class '(.*)'>", t):
        t = m.group(1)
    if m := re.match(r"(.*)\[.*\]", t):
        t = m.group(1)
    t = {"string": "str", "integer": "int"}.get(t, t)
    return "tuple" if "," in t or "tuple" in t else t


def _typed_value(value: str, t: str) -> tuple[str, Any] | None:
    """``State._postprocess`` after the type is read: (type, value) or None (ERROR)."""
    if t == "str":
        try:
            return "str", _literal(value)
        except ValueError:
            return "str", value  # REval: eval, else the text itself
    if t == "datetime.datetime":
        try:
            from dateutil.parser import parse

            return t, parse(value[:100]).isoformat()
        except Exception:  # dateutil raises several kinds; REval: ERROR
            return None
    if value == "None" or t == "NoneType":
        return "NoneType", None
    if t == "type":
        return (t, value) if value in _BUILTIN_TYPES else None
    if t not in _BUILTIN_TYPES and t not in _VIEW_KEYS:
        return None  # locate() finds nothing there (or no actual value has that type)
    try:
        lit = _literal(value)
        if t == "collections.deque":
            return t, list(lit)
        return t, float(lit) if t == "numpy.float64" else lit
    except (ValueError, TypeError, OverflowError):
        return (t, list(value)) if t == "collections.deque" else None  # REval: deque(text)


def read_state(text: str) -> tuple[str, Any] | str | None:
    """``State._postprocess``: ``(type, value)``, :data:`NIL`, or None (ERROR: no answer)."""
    if "[/THOUGHT]" not in text:
        return None
    text = text.replace("\u2018", "'").replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')
    resp = _answer_part(text.strip())
    if resp.capitalize() == "Nil" or resp == "[Nil]":
        return NIL
    k = resp.rfind(";")
    if k == -1 or len(resp) > MAX_ANSWER_CHARS or len(resp) - k > 1000:
        return None
    value, t = resp[:k].strip(), resp[k + 1 :].strip().lower()
    return NIL if value.capitalize() == "Nil" else _typed_value(value, _type_name(t))


def _allclose(a: Any, b: Any) -> bool:
    try:
        import numpy as np

        return bool(np.allclose(np.array(a, dtype=float), np.array(b, dtype=float)))
    except Exception:  # ragged, not numbers, numpy missing: REval's comparison fails too
        return False


def _equal(key: str, val: Any, d: dict[str, Any]) -> bool:
    try:
        if d["exact"] and key not in _VIEW_KEYS:
            return bool(val == d["plain"])
        if key != d["type"] or d["plain"] is None:
            return False
        return _allclose(val, d["plain"]) if key == "numpy.ndarray" else bool(val == d["plain"])
    except Exception:  # e.g. RecursionError
        return False


def state_matches(ans: tuple[str, Any] | str, values: list[dict[str, Any]] | None) -> bool:
    """``State._eq``: Nil with Nil; else the answer's type among the actual types, its value of that
    type, and equal to one actual value (a float within 1e-6)."""
    if ans == NIL or values is None:
        return ans == NIL and values is None
    key, val = ans
    if key not in {d["type"] for d in values} or (key not in _VIEW_KEYS and type(val).__name__ != key):
        return False
    for d in values:
        if key != "float":
            if _equal(key, val, d):
                return True
            continue
        try:
            if abs(val - d["plain"]) < 1e-6 and (d["exact"] or d["type"] == "numpy.float64"):
                return True
        except Exception:  # REval: continue
            continue
    return False


_VALUE_TEXT = {  # how the reference writes an actual value that is no literal
    "collections.deque": "{!r}",
    "bytearray": "bytearray({!r})",
    "datetime.datetime": "{}",
    "numpy.ndarray": "{!r}",
    "numpy.float64": "{!r}",
    "type": "{}",
}


def state_text(values: list[dict[str, Any]] | None) -> str | None:
    """An answer REval accepts for these actual values (``Nil`` for none), or None where none exists."""
    if values is None:
        return NIL
    for d in values:
        if d["plain"] is None and not d["exact"]:
            continue
        form = "{}" if d["exact"] and d["plain"] is None else "{!r}" if d["exact"] else _VALUE_TEXT.get(d["type"])
        try:
            text = f"{form.format(d['plain'])}; {d['type']}" if form else None
        except ValueError:  # an int past the digit limit
            continue
        ans = read_state(f"[/THOUGHT]\n[ANSWER]\n{text}\n[/ANSWER]") if text else None
        if ans is not None and state_matches(ans, values):
            return text
    return None


def answer_source(text: str, question: str) -> tuple[str | None, str]:
    """REval-CO's answer as the method REval builds from it (``_postprocess_phase2``,
    ``penalty_pattern``, ``create_from_answer``), or None and why it is refused."""
    if "[/THOUGHT]" not in text:
        return None, "no [/THOUGHT] (REval: assert False)"
    resp = _answer_part(text)
    if len(resp) > MAX_ANSWER_CHARS:
        return None, "answer too long"
    asked, given = question.strip().split("\n"), resp.strip().split("\n")
    if len(given) < len(asked):  # padded in front with the question's first lines
        resp = "\n".join(asked[: len(asked) - len(given)] + given)
    if any(p in resp for p in PENALTY) or resp.count("assert") < question.count("assert"):
        return None, "penalized: assert True/False, or fewer asserts than asked"
    src, in_block = "def dreval_output_pred(self):", False
    for line in resp.split("\n"):
        src += f"\n{line}" if in_block else f"\n\t{line}"
        in_block ^= "'''" in line or '"""' in line
    src = src.replace("assert", "self.assert")
    try:
        body = ast.parse(src).body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return None, f"not Python: {type(exc).__name__}"
    if len(body) != 1 or not isinstance(body[0], ast.FunctionDef):
        return None, "code outside the test method"
    return src, ""
