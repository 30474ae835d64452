"""Input generation (funnel step 2): ``n`` input sets per function.

Two backends share the output format (argument text as inside ``f(...)``, positional,
canonical literals):

- ``mutate`` (offline default): new inputs derived from the problem's example inputs and its
  type hints: perturbed numbers, lengths, strings, shapes and edge cases; deterministic for a
  seed (:func:`mutate_inputs`).
- ``llm``: a chat model writes the inputs (:func:`llm_prompt`); its answer is parsed with
  ``ast.literal_eval`` only and never executed (:func:`parse_llm_inputs`).

>>> fn = {"task_id": "t", "params": ["nums", "k"], "annotations": {"nums": "List[int]", "k": "int"},
...       "examples": [{"args": "[1, 2, 3], 2", "output": "3"}]}
>>> ins = mutate_inputs(fn, 5, seed=0)
>>> len(ins), ins[0]
(5, '[1, 2, 3], 2')
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
import string
from collections import Counter
from typing import Any

from codethinker.contra.calls import entry_call
from codethinker.contra.values import NoLiteral, literal_repr, parse_call_args
from codethinker.data.extract import positional_args

__all__ = ["llm_prompt", "mutate_inputs", "parse_llm_inputs", "select_functions", "stable_rng"]


def stable_rng(seed: int, *parts: str) -> random.Random:
    """A ``random.Random`` seeded from ``seed`` and ``parts`` (stable across processes)."""
    digest = hashlib.sha256("\x1f".join([str(seed), *parts]).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def select_functions(functions: list[dict[str, Any]], limit: int | None, seed: int) -> list[dict[str, Any]]:
    """A deterministic sample of ``limit`` functions (all when ``limit`` is falsy), in input order.

    Functions are ranked by a hash of (seed, task_id), so a larger limit keeps every function
    a smaller one chose.
    """
    if not limit or limit >= len(functions):
        return list(functions)

    def rank(f: dict[str, Any]) -> bytes:
        return hashlib.sha256(f"{seed}\x1f{f['task_id']}".encode()).digest()

    chosen = {f["task_id"] for f in sorted(functions, key=rank)[:limit]}
    return [f for f in functions if f["task_id"] in chosen]


# --------------------------------------------------------------------------- mutate backend
class _Pool:
    """What the examples show about one parameter: value ranges, alphabets, lengths."""

    def __init__(self, values: list[Any]):
        self.values = values
        ints = [v for v in _leaves(values) if type(v) is int]
        floats = [v for v in _leaves(values) if type(v) is float]
        strs = [v for v in _leaves(values) if type(v) is str]
        self.int_lo, self.int_hi = (min(ints), max(ints)) if ints else (0, 10)
        self.float_lo, self.float_hi = (min(floats), max(floats)) if floats else (0.0, 10.0)
        chars = Counter(c for s in strs for c in s)
        self.alphabet = sorted(chars) or list(string.ascii_lowercase[:3])
        self.strings = sorted(set(strs))
        self.str_lens = [len(s) for s in strs] or [3]
        self.small_set = sorted(set(ints)) if ints and len(set(ints)) <= 3 else None


def _leaves(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, list | tuple | set):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        else:
            out.append(v)
    return out


def _new_int(rng: random.Random, pool: _Pool, v: int | None = None) -> int:
    if pool.small_set is not None and rng.random() < 0.8:
        return rng.choice(pool.small_set)
    lo, hi = pool.int_lo, pool.int_hi
    span = max(hi - lo, 3)
    lo2 = lo - span // 2 if lo < 0 else max(0, lo - span // 2)
    if lo >= 1 and lo2 < 1:
        lo2 = 1  # examples all >= 1: keep it that way (sizes, counts)
    hi2 = min(hi + span // 2, max(hi, 10**6))
    roll = rng.random()
    if v is not None and roll < 0.4:
        return max(lo2, min(hi2, v + rng.choice([-3, -2, -1, 1, 2, 3])))
    if roll < 0.55:
        return rng.choice([lo2, hi2, lo, hi])
    return rng.randint(lo2, hi2)


def _new_str(rng: random.Random, pool: _Pool, v: str | None = None, max_len: int = 12) -> str:
    roll = rng.random()
    if v is not None and len(v) > 1 and roll < 0.3:
        chars = list(v)
        rng.shuffle(chars)
        return "".join(chars)
    if v is not None and roll < 0.45:
        i = rng.randrange(len(v)) if v else 0
        return v[:i] + rng.choice(pool.alphabet) + v[i + 1 :]
    if len(pool.strings) > 1 and roll < 0.55 and all(len(s) <= max_len for s in pool.strings):
        return rng.choice(pool.strings)
    lo = max(1, min(pool.str_lens) - 1)
    hi = max(lo, min(max(pool.str_lens) + 2, max_len))
    if rng.random() < 0.1:
        return rng.choice(pool.alphabet) * rng.randint(lo, hi)  # edge case: one repeated character
    return "".join(rng.choice(pool.alphabet) for _ in range(rng.randint(lo, hi)))


def _mutate(rng: random.Random, v: Any, pool: _Pool, max_len: int, depth: int = 0) -> Any:
    t = type(v)
    if t is bool:
        return not v if rng.random() < 0.5 else v
    if t is int:
        return _new_int(rng, pool, v)
    if t is float:
        return round(rng.uniform(pool.float_lo, pool.float_hi) if rng.random() < 0.5 else v * rng.uniform(0.5, 1.5), 5)
    if t is str:
        return _new_str(rng, pool, v, max_len)
    if t is list and depth < 3:
        return _mutate_list(rng, v, pool, max_len, depth)
    return v  # None, tuples, dicts: kept


def _mutate_list(rng: random.Random, v: list[Any], pool: _Pool, max_len: int, depth: int) -> list[Any]:
    items = list(v)
    if len(items) > max_len:  # shrink long examples to a window
        start = rng.randrange(len(items) - max_len + 1)
        items = items[start : start + max_len]
    grid = bool(items) and all(type(x) is list for x in items) and len({len(x) for x in items}) == 1
    roll = rng.random()
    if not items:
        return items
    if grid:
        rows = max(1, min(max_len, len(items) + rng.choice([-1, 0, 0, 1])))
        cols = max(1, min(max_len, len(items[0]) + rng.choice([-1, 0, 0, 1])))
        src = [x for row in items for x in row] or [0]
        if rng.random() < 0.5 and all(type(x) is int for x in src):
            return [[_new_int(rng, pool) for _ in range(cols)] for _ in range(rows)]
        return [[rng.choice(src) for _ in range(cols)] for _ in range(rows)]
    if roll < 0.2:
        rng.shuffle(items)
        return items
    if roll < 0.35 and len(items) > 1:
        del items[rng.randrange(len(items))]
        return items
    if roll < 0.5 and len(items) < max_len:
        items.insert(rng.randrange(len(items) + 1), rng.choice(items))
        return items
    if roll < 0.6:
        return sorted(items, key=repr) if rng.random() < 0.5 else items[::-1]
    # element-wise: rebuild with a new length, elements mutated from the examples
    n = max(1, min(max_len, len(items) + rng.randint(-2, 3)))
    return [_mutate(rng, rng.choice(items), pool, max_len, depth + 1) for _ in range(n)]


def mutate_inputs(
    fn: dict[str, Any], n: int, *, seed: int, max_len: int = 12, max_chars: int = 400, include_examples: bool = True
) -> list[str]:
    """Up to ``n`` distinct argument texts for ``fn`` (a function record of ast_filter).

    The examples come first (when ``include_examples`` and short enough), then mutations:
    one parameter changed (others kept from the same example) or all at once. Fewer than
    ``n`` come back only when the examples allow no more distinct inputs.
    """
    rng = stable_rng(seed, fn["task_id"])
    params = fn["params"]
    examples = []
    for ex in fn["examples"]:
        args, kwargs = parse_call_args(ex["args"])
        if kwargs or len(args) != len(params):
            continue
        examples.append(list(args))
    out: list[str] = []
    seen: set[str] = set()

    def add(values: list[Any]) -> None:
        try:
            text = ", ".join(literal_repr(v) for v in values)
        except NoLiteral:
            return
        if len(text) <= max_chars and text not in seen:
            seen.add(text)
            out.append(text)

    if include_examples:
        for ex in examples:
            if len(out) < n:
                add(ex)
    if not examples or not params:
        return out
    pools = [_Pool([ex[i] for ex in examples]) for i in range(len(params))]
    attempts = 0
    while len(out) < n and attempts < 40 * n:
        attempts += 1
        base = list(rng.choice(examples))
        if rng.random() < 0.6:
            i = rng.randrange(len(params))
            base[i] = _mutate(rng, base[i], pools[i], max_len)
        else:
            base = [_mutate(rng, v, p, max_len) for v, p in zip(base, pools, strict=True)]
        add(base)
    return out


# --------------------------------------------------------------------------- llm backend
LLM_PROMPT = """Here is a Python function and some example inputs.

```python
{code}
```

The original signature, with type hints: {signature}
Example calls:
{examples}

Write {n} new, diverse test inputs for `{entry}`: small, valid for the problem, covering typical \
and edge cases. Give one call per line, exactly in the form `{entry}(<arguments>)`, using only \
Python literals (numbers, strings, lists, tuples, dicts, booleans, None) as arguments. Do not \
write anything else."""


def llm_prompt(fn: dict[str, Any], n: int) -> list[dict[str, str]]:
    """Chat messages asking a model for ``n`` inputs of ``fn`` (the paper: signature + input format)."""
    hints = fn.get("annotations", {})
    sig = ", ".join(f"{p}: {hints[p]}" if p in hints else p for p in fn["params"])
    ret = f" -> {fn['returns']}" if fn.get("returns") else ""
    examples = "\n".join(f"{fn['entry']}({ex['args']})" for ex in fn["examples"][:3])
    text = LLM_PROMPT.format(
        code=fn["code"].rstrip(), signature=f"{fn['entry']}({sig}){ret}", examples=examples, n=n, entry=fn["entry"]
    )
    return [{"role": "user", "content": text}]


_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.S)


def _leading_call(line: str, entry: str) -> str:
    """The ``entry(...)`` call a line starts with, without what follows it (`` == value``, ``;``).

    Python's parser finds where the call ends, so a string argument holding `` == `` stays whole; a line it
    cannot parse is cut at its first `` == `` (what the caller then rejects, it counts by reason).

    >>> _leading_call("f(0, ' == ') == [1]", "f"), _leading_call("f(1, 2);", "f"), _leading_call("f(1, == 2", "f")
    ("f(0, ' == ')", 'f(1, 2)', 'f(1,')
    """
    text = line.rstrip().rstrip(";")
    try:  # a deep or long expression makes the parser raise RecursionError or MemoryError
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        node = None
    call = entry_call(node, entry)
    if call is not None:
        return ast.get_source_segment(text, call) or text
    return line.split(" == ", 1)[0].rstrip().rstrip(";")


def parse_llm_inputs(
    text: str, params: list[str], entry: str = "f", max_chars: int = 400
) -> tuple[list[str], Counter[str]]:
    """Argument texts found in a model answer, and the rejected lines by reason.

    A line counts when it is ``entry(<literal arguments>)`` (optionally behind ``assert`` or a
    list bullet) that fits ``params``; the arguments are read with ``ast.literal_eval`` only.
    """
    found: list[str] = []
    rejected: Counter[str] = Counter()
    text = _THINK.sub("", text or "")
    prefix = f"{entry}("
    for raw in text.split("\n"):
        if raw.strip().startswith("```"):
            continue  # a code fence
        line = raw.strip().strip("`").strip()
        line = re.sub(r"^(?:[-*]|\d+[.)])\s+", "", line)
        line = line.removeprefix("assert ").strip()
        if not line:
            continue
        if not line.startswith(prefix):
            rejected["not_a_call"] += 1
            continue
        line = _leading_call(line, entry)
        if not line.endswith(")"):
            rejected["not_a_call"] += 1
            continue
        inner = line[len(prefix) : -1]
        if len(inner) > max_chars:
            rejected["too_long"] += 1
            continue
        try:
            args = positional_args(inner, params)
        except ValueError as exc:
            msg = str(exc)
            rejected["not_literal" if "literal" in msg or "valid Python" in msg else "wrong_arguments"] += 1
            continue
        if args in found:
            rejected["duplicate"] += 1
            continue
        found.append(args)
    return found, rejected


# --------------------------------------------------------------------------- the stage's core
def generate(
    functions: list[dict[str, Any]],
    *,
    backend: str,
    n: int,
    seed: int,
    mutate: dict[str, Any] | None = None,
    client: Any = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Input records (the function record plus ``inputs``) and counts for either backend."""
    if backend not in ("mutate", "llm"):
        raise ValueError(f"gen_inputs.backend must be 'mutate' or 'llm', got {backend!r}")
    rejected: Counter[str] = Counter()
    if backend == "mutate":
        lists = [mutate_inputs(f, n, seed=seed, **(mutate or {})) for f in functions]
    else:
        if client is None:
            raise ValueError("the llm backend needs a ChatClient")
        answers = client.complete_many([llm_prompt(f, n) for f in functions])
        lists = []
        for f, answer in zip(functions, answers, strict=True):
            if answer is None:
                rejected["request_failed"] += 1
                lists.append([])
                continue
            found, bad = parse_llm_inputs(answer, f["params"], f["entry"])
            rejected.update(bad)
            if len(found) > n:
                rejected["beyond_n"] += len(found) - n
            lists.append(found[:n])
    records = []
    no_inputs = 0
    for f, inputs in zip(functions, lists, strict=True):
        if not inputs:
            no_inputs += 1
            continue
        keep = ("task_id", "question_id", "difficulty", "entry", "code", "params", "n_lines", "recursive")
        records.append({**{k: f.get(k) for k in keep}, "inputs": inputs})
    pairs = sum(len(r["inputs"]) for r in records)
    counts = {
        "functions_in": len(functions),
        "functions": len(records),
        "functions_without_inputs": no_inputs,
        "pairs_requested": n * len(functions),
        "pairs": pairs,
        "short_of_n": n * len(functions) - pairs,
        "rejected_lines": dict(rejected.most_common()),
    }
    return records, counts
