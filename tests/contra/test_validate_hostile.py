"""Hostile model output: huge literals, junk, deep nesting, NUL bytes, surrogates, code injection.

Every scorer must answer quickly with ``fmt = 0`` and execute nothing (SPEC §3: LOCALS and the
answer are read with ``ast.literal_eval`` only)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

import pytest

from codethinker.contra.render import render_trace
from codethinker.contra.validate import parse_trace, prefix_score, validate
from codethinker.rewards.crm import crm_score
from codethinker.rewards.orm import orm_score
from codethinker.rewards.whitebox import whitebox_score

from .helpers import example_flow, set_answer, set_locals, within

FLOW = example_flow()
GOOD = render_trace(FLOW, ["a", "b", "c", "d"])
LIMIT_S = 5.0  # generous: each input is answered in well under a second today


def in_locals(text: str) -> str:
    return set_locals(GOOD, 1, text)


def in_return(rhs: str) -> str:
    return set_answer(GOOD, rhs)


HOSTILE: dict[str, Callable[[], str]] = {
    "5 MB LOCALS line": lambda: in_locals("{'a': '" + "x" * 5_000_000 + "'}"),
    "1.5 MB LOCALS line": lambda: in_locals("{'a': '" + "x" * 1_500_000 + "'}"),
    "10^6-digit int in LOCALS": lambda: in_locals("{'a': " + "7" * 1_000_000 + "}"),
    "150k-digit int in LOCALS": lambda: in_locals("{'a': " + "7" * 150_000 + "}"),
    "10^6-digit int in RETURN": lambda: in_return("7" * 1_000_000),
    "150k-digit int in RETURN": lambda: in_return("7" * 150_000),
    "100k nested brackets in LOCALS": lambda: in_locals("{'a': " + "[" * 100_000 + "]" * 100_000 + "}"),
    "50k nested brackets in LOCALS": lambda: in_locals("{'a': " + "[" * 50_000 + "]" * 50_000 + "}"),
    "100k nested dicts in LOCALS": lambda: in_locals("{'a': " + "{'a': " * 100_000 + "1" + "}" * 100_000 + "}"),
    "100k nested brackets in RETURN": lambda: in_return("[" * 100_000 + "]" * 100_000),
    "50k unary minus in LOCALS": lambda: in_locals("{'a': " + "-" * 50_000 + "1}"),
    "50k unary minus in RETURN": lambda: in_return("-" * 50_000 + "1"),
    "50k not in RETURN": lambda: in_return("not " * 50_000 + "1"),
    "3 MB of junk": lambda: "junk \x01\u2028" * 300_000,
    "1.9 MB of junk in a wrapper": lambda: "[TRACE]\n" + "x" * 1_900_000 + "\n[/TRACE]",
    "10^6 empty lines": lambda: "\n" * 1_000_000,
    "10^6 lines in a wrapper": lambda: "[TRACE]\n" + "x\n" * 1_000_000 + "[/TRACE]",
    "10^6 tag lines": lambda: "[TRACE]\n" + "[CODE]\n" * 1_000_000 + "[/TRACE]",
    "100k code lines": lambda: (
        "[TRACE]\n[CODE]\n" + "".join(f"[LINENO {i}]    x\n" for i in range(100_000)) + "[/CODE]\n[/TRACE]"
    ),
    "100k blocks": lambda: (
        "[TRACE]\n" + "[CODE]\n[LINENO 0]    def f(n):\n[/CODE]\n[THOUGHT]\n[/THOUGHT]\n"
        "[LOCALS]\n{}\n[/LOCALS]\n" * 30_000 + "[RETURN]\nassert f(2) == 1\n[/RETURN]\n[/TRACE]"
    ),
    "2 MB of LOCALS over many blocks": lambda: (
        "[TRACE]\n"
        + "".join(
            f"[CODE]\n[LINENO {i}]    x\n[/CODE]\n[THOUGHT]\n[/THOUGHT]\n[LOCALS]\n{{'a': {[0] * 60_000}}}\n[/LOCALS]\n"
            for i in range(10)
        )
        + "[RETURN]\nassert f(2) == 1\n[/RETURN]\n[/TRACE]"
    ),
    "NUL bytes only": lambda: "\x00" * 100_000,
    "NUL in a code line": lambda: GOOD.replace("b = a * 2", "b = a\x00* 2"),
    "NUL in LOCALS": lambda: in_locals("{'n': 2, 'a': 3, 'b': 6}\x00"),
    "NUL in RETURN": lambda: in_return("[0, 1, 2]\x00"),
    "NUL in a tag": lambda: GOOD.replace("[/CODE]", "[/CODE]\x00", 1),
    "lone surrogate in LOCALS": lambda: in_locals("{'n': 2, 'a': 3, 'b': '\ud800'}"),
    "lone surrogate in RETURN": lambda: in_return("'\udfff'"),
    "lone surrogate after a tag": lambda: GOOD.replace("[LOCALS]", "[LOCALS]\ud800", 1),
    "lone surrogate in a code line": lambda: GOOD.replace("b = a * 2", "b = a * 2\udc80"),
    "CRLF line ends": lambda: GOOD.replace("\n", "\r\n"),
    "CR line ends": lambda: GOOD.replace("\n", "\r"),
    "call in LOCALS": lambda: in_locals("{'n': 2, 'a': 3, 'b': int('6')}"),
    "name in LOCALS": lambda: in_locals("{'n': 2, 'a': 3, 'b': b}"),
    "list comprehension in LOCALS": lambda: in_locals("{'n': 2, 'a': 3, 'b': [i for i in range(6)]}"),
    "dict comprehension as LOCALS": lambda: in_locals("{k: 6 for k in 'nab'}"),
    "lambda in LOCALS": lambda: in_locals("{'n': 2, 'a': 3, 'b': (lambda: 6)()}"),
    "walrus in LOCALS": lambda: in_locals("{'n': 2, 'a': 3, 'b': (b := 6)}"),
    "f-string in LOCALS": lambda: in_locals("{'n': 2, 'a': 3, 'b': f'{6}'}"),
    "arithmetic in RETURN": lambda: in_return("[0, 1, 1 + 1]"),
    "call in RETURN": lambda: in_return("list(range(3))"),
    "name in RETURN": lambda: in_return("result"),
}


# valid without a ground truth (only the code check against the source rejects them)
STRUCTURALLY_VALID = {"NUL in a code line", "lone surrogate in a code line", "2 MB of LOCALS over many blocks"}


def check_all(text: str, structurally_valid: bool = False) -> None:
    if not structurally_valid:
        v = parse_trace(text)
        assert not v.ok and v.reason
    v = validate(text, FLOW)
    assert not v.ok and v.reason
    p = prefix_score(text, FLOW)
    assert p < sum(FLOW.weights)
    s = crm_score(text, FLOW)
    assert (s["fmt"], s["reward"], s["rcs"]) == (0, 0.0, 0.0) and s["reason"]
    o = orm_score(text, FLOW)
    assert (o["fmt"], o["reward"]) == (0, 0.0)
    w = whitebox_score(text, FLOW)
    assert (w["fmt"], w["reward"]) == (0, 0.0)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_input_is_rejected_quickly(name):
    text = HOSTILE[name]()
    with within(LIMIT_S):
        check_all(text, name in STRUCTURALLY_VALID)
    del text
    gc.collect()


def test_surrogates_everywhere_do_not_break_the_clean_trace_check():
    text = render_trace(FLOW, ["\ud800", "\udfff x", "ok", "\ud83d"])  # lone surrogates in thoughts are fine
    assert crm_score(text, FLOW)["reward"] == 4.0


def test_bom_before_trace_is_rejected():
    assert crm_score("\ufeff" + GOOD, FLOW)["fmt"] == 0


def test_sentinel_code_in_return_and_locals_is_never_executed(tmp_path: Path):
    sentinel = tmp_path / "sentinel"
    cmd = f"__import__('os').system('touch {sentinel}')"
    opener = f"open('{sentinel}', 'w')"
    texts = [
        in_return(cmd),
        in_return(f"[{cmd}]"),
        in_return(opener),
        in_locals(f"{{'n': {cmd}}}"),
        in_locals(f"{{'n': 2, 'a': 3, 'b': {opener}}}"),
        in_locals(f"{{'x': [exec('{cmd}') for _ in range(1)]}}"),
    ]
    for text in texts:
        with within(LIMIT_S):
            check_all(text)
    assert not sentinel.exists()


def test_injection_in_the_assertion_arguments_is_never_executed(tmp_path: Path):
    """The SPEC only constrains the right side of ``==``: the arguments are read, never run."""
    sentinel = tmp_path / "sentinel"
    text = GOOD.replace("assert f(2) ==", f"assert f(__import__('os').system('touch {sentinel}')) ==")
    assert text != GOOD
    with within(LIMIT_S):
        parse_trace(text)
        validate(text, FLOW)
        crm_score(text, FLOW)
        orm_score(text, FLOW)
        whitebox_score(text, FLOW)
        prefix_score(text, FLOW)
    assert not sentinel.exists()


def test_whitebox_many_unclosed_groups_is_quick():
    text = "[WHITEBOX]\n" * 20_000  # 220 KB, well under every size cap; linear work takes milliseconds
    with within(3.0):
        assert whitebox_score(text, FLOW)["reward"] == 0.0


@pytest.mark.parametrize(
    ("text", "wb_reward"),
    [
        ("[THOUGHT]\n" + "x\n" * 1_000_000 + "[/THOUGHT]\n[ANSWER]\nassert f(2) == [0, 1, 2]\n[/ANSWER]", 0.0),
        ("[THOUGHT]\n[/THOUGHT]\n[ANSWER]\nassert f(2) == " + "[" * 100_000 + "\n[/ANSWER]", 0.0),
        ("[THOUGHT]\n[/THOUGHT]\n[ANSWER]\nassert f(2) == " + "9" * 1_000_000 + "\n[/ANSWER]", 0.0),
        ("[THOUGHT]\n[/THOUGHT]\n[ANSWER]\nassert f(2) == __import__('os').getcwd()\n[/ANSWER]", 0.0),
        # a hostile white-box answer is just wrong: the right final answer still earns (1 - a) * 2 = 1
        (
            "[THOUGHT]\n[/THOUGHT]\n[WHITEBOX]\n"
            + "Q1: "
            + "[" * 100_000
            + "\n" * 2
            + "[/WHITEBOX]\n[ANSWER]\nassert f(2) == [0, 1, 2]\n[/ANSWER]",
            1.0,
        ),
        (
            "[THOUGHT]\n[/THOUGHT]\n"
            + "[WHITEBOX]\nQ1: 2\n[/WHITEBOX]\n" * 50_000
            + "[ANSWER]\nassert f(2) == 1\n[/ANSWER]",
            0.0,
        ),
        ("[THOUGHT]\n" * 500_000, 0.0),
    ],
)
def test_hostile_vanilla_output(text, wb_reward):
    with within(LIMIT_S):
        assert orm_score(text, FLOW)["reward"] == 0.0
        assert whitebox_score(text, FLOW)["reward"] == wb_reward
