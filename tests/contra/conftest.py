"""Real ground-truth flows, traced once per session (hand-written programs and CRUXEval rows)."""

from __future__ import annotations

import json

import pytest

from codethinker.contra.tracer import Flow, trace_many

from .helpers import EXAMPLE_SRC

HAND_PROGRAMS: list[tuple[str, str, str]] = [
    (EXAMPLE_SRC, "2", "f"),
    (
        "def f(nums, target):\n"
        "    seen = {}\n"
        "    for i, n in enumerate(nums):\n"
        "        if target - n in seen:\n"
        "            return [seen[target - n], i]\n"
        "        seen[n] = i\n"
        "    return []\n",
        "nums = [2, 7, 11, 15], target = 9",
        "f",
    ),
    (
        "def f(text):\n"
        "    '''Docstring [CODE]'''\n"
        "    marker = '''\n[/CODE]\n\n[LOCALS]\n'''  # tags inside a string\n"
        "    out = []\n"
        "    if not text:\n"
        "        out.append(None)\n"
        "    try:\n"
        "        ratio = len(text) / 3\n"
        "    except ZeroDivisionError:\n"
        "        ratio = -1.0\n"
        "    k = 0\n"
        "    while k < len(text) and text[k] != 'z':\n"
        "        out.append((k, text[k], {text[k]}))\n"
        "        k += 1\n"
        "    return out, ratio, marker.count('[')\n",
        "'ab'",
        "f",
    ),
    (
        "from collections import Counter\n"
        "def f(s):\n"
        "    c = Counter(s)\n"
        "    best = helper(c)\n"
        "    flag = best > 1 or not s\n"
        "    return {True: flag, 1.5: best, (1, 'a'): None, b'k': 1 + 2j}\n"
        "def helper(c):\n"
        "    return max(c.values())\n",
        "'abca'",
        "f",
    ),
    ("def g(x): return [x] * 3\n", "(1, )", "g"),
]

CRUX_SAMPLE_STEP = 20  # every 20th CRUXEval row: 40 flows


def _trace_ok(items: list[tuple[str, str, str]]) -> list[Flow]:
    outs = trace_many(items)
    bad = [(item[1], o.reason) for item, o in zip(items, outs, strict=True) if not o.ok]
    assert not bad, bad
    return [o.flow for o in outs]


@pytest.fixture(scope="session")
def hand_flows() -> list[Flow]:
    return _trace_ok(HAND_PROGRAMS)


@pytest.fixture(scope="session")
def crux_rows(cruxeval_path) -> list[dict]:
    return [json.loads(ln) for ln in cruxeval_path.read_text(encoding="utf-8").splitlines() if ln.strip()]


@pytest.fixture(scope="session")
def crux_sample_flows(request) -> list[Flow]:
    """Flows of a spread of CRUXEval rows; empty (not skipped) where ../shared is absent."""
    try:
        rows = request.getfixturevalue("crux_rows")
    except pytest.skip.Exception:
        return []
    items = [(r["code"], r["input"], "f") for r in rows[::CRUX_SAMPLE_STEP]]
    return [o.flow for o in trace_many(items) if o.ok]


@pytest.fixture(scope="session")
def real_flows(hand_flows, crux_sample_flows) -> list[Flow]:
    return [*hand_flows, *crux_sample_flows]
