"""CRUXEval-X (codethinker/evaluation/multilingual.py, its runner multilingual_runner.py, used through
the names multilingual re-exports): reading and guarding answers, the records' split into program and
reference, the isolated compile-and-run judge (right, wrong, ill-typed and hostile literals, the
sandbox's limits), runtimes reported missing, and the oracle of every language whose runtime is here
(first 10 problems by default, all under ``slow``)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.evaluation import multilingual as ml
from codethinker.evaluation.generalize import CRUXEVAL_X_LANGUAGES, GROUPS, Item, get_task, oracle_check

STATUSES = {"pass", "fail", "timeout", "error", "no_answer"}
COUNTS = {"cpp": 733, "cs": 670, "d": 629, "go": 699, "java": 698, "jl": 680, "js": 743, "lua": 741, "php": 755}
COUNTS |= {"pl": 728, "py": 799, "r": 699, "rb": 748, "rkt": 681, "rs": 690, "scala": 712, "sh": 674, "swift": 654}
COUNTS |= {"ts": 726}
# records whose `code` checks another assertion than their output_reasoning (no reference literal: the
# oracle answers nothing, a no_answer); D's expect a null result, Julia's call f with an untyped Dict()
NO_REFERENCE = {
    "d": [116, 203, 270, 341, 396, 402, 467, 609, 746],
    "jl": [116, 270, 341, 396, 467, 503, 533, 609, 746],
}
KNOWN_ORACLE_FAILURES = {lang: {f"sample_{i}": "no_answer" for i in NO_REFERENCE.get(lang, [])} for lang in ml.LANGS}
# the check depends on hash order, which changes run to run (Rust's HashMap seed, Java's Map.of salt):
# these pass or fail by chance, as they did for CRUXEval-X
# (measured: each failed 13-24 of 40 runs; no other Rust program with a HashMap/HashSet, nor any other
# Java program with Map.of/Set.of over 10 runs, ever failed)
FLAKY = {"rs": {"sample_6", "sample_135", "sample_627"}, "java": {"sample_71"}}


def _task(lang: str, **kw) -> ml.CRUXEvalX:
    task = ml.CRUXEvalX(lang, **kw)
    if why := task.unavailable():
        assert why.startswith("runtime missing: "), why
        pytest.skip(why)
    return task


def _item(program: str, expected: str | None = None) -> Item:
    pre, suf = next(ln for ln in program.splitlines() if "????" in ln).split("????")
    return Item("t", [], {"program": program, "expected": expected, "pre": pre.strip(), "suf": suf.strip()})


def _answer(lit: str) -> str:
    return f"[THOUGHT]...[/THOUGHT]\n[ANSWER]\n{lit}\n[/ANSWER]"


# f(1) == 2 in six languages (the checks as CRUXEval-X writes them)
SYNTH = {
    "cpp": "#include<assert.h>\n#include<bits/stdc++.h>\nlong f(long x) {\n    return x + 1;\n}\n"
    "int main() {\n    auto candidate = f;\n    assert(candidate(1) == ????);\n}\n",
    "java": "import java.util.*;\nclass Problem {\n    public static long f(long x) {\n        return x + 1;\n    }\n"
    "    public static void main(String[] args) {\n    assert(f((1l)) == ????);\n    }\n\n}\n",
    "rs": "fn f(x: i64) -> i64 {\n    x + 1\n}\n\nfn main() {\n    let candidate = f;\n"
    "    assert_eq!(candidate(1), ????);\n}\n",
    "js": "function f(x) {\n    return x + 1;\n}\nconst assert = require('node:assert');\n\n\nfunction test() {\n"
    "  let candidate = f;\n  assert.deepEqual(candidate(1),????);\n}\n\ntest();\n",
    "py": "def f(x: int) -> int:\n    return x + 1\n\ndef check(candidate):\n    assert candidate(1) == ????\n\n"
    "def test_check():\n    check(f)\n\ntest_check()\n",
    "sh": '#!/bin/bash\nf() {\n    echo $(( $1 + 1 ))\n}\n\ncandidate() {\n    f "$@"\n}\n\nset -e\n'
    "run_test() {\n    [[ $(candidate 1) = ???? ]]\n}\n\nrun_test\n",
}
# (answer, status) per language: right, wrong, ill-typed, and hostile literals
CASES = {
    "cpp": [("2", "pass"), ("(2)", "pass"), ("3", "fail"), ('"2"', "error"), ("3 || true", "fail"),
            ("2)); return 0; ((2", "no_answer"), ("std::vector<long>(1L << 40).size()", "fail")],
    "java": [("2l", "pass"), ("3l", "fail"), ('"2"', "error"),
             ("new Object() { long g() { while (true) {} } }.g()", "timeout")],
    "rs": [("2", "pass"), ("3", "fail"), ('"2"', "error"), ("loop {}", "timeout"),
           ("std::process::exit(0)", "no_answer"), ("{ 2 }; std::process::exit(0); (2", "no_answer")],
    "js": [("2", "pass"), ("3", "fail"), ("3 || true", "fail"), ("(() => { while (true) {} })()", "timeout"),
           ("2);process.exit(0);(2", "no_answer"), ("`${process.exit(0)}`", "no_answer")],
    "py": [("2", "pass"), ("3", "fail"), ("3 or True", "fail"), ("next(x for x in iter(int, 1) if x)", "timeout"),
           ("len('x' * 10**11)", "fail"), ("__import__('os')._exit(0)", "no_answer"), ("2\nimport os", "no_answer"),
           ("f'{exit(0)}'", "no_answer")],
    "sh": [('"2"', "pass"), ("2", "pass"), ('"3"', "fail"), ("*", "no_answer"), ("2 ]] || [[ 1", "no_answer"),
           ('"$(exit 0)"', "no_answer"), ("2;exit", "no_answer")],
}  # fmt: skip


class TestAnswers:
    def test_literal_is_read_from_the_last_answer_group(self):
        assert ml.literal("[ANSWER]\n1\n[/ANSWER] [ANSWER]\n[1, 2]\n[/ANSWER]") == "[1, 2]"
        assert ml.literal('[ANSWER]\n```cpp\n(std::string("a"))\n```\n[/ANSWER]') == '(std::string("a"))'
        assert ml.literal("no tags") is None and ml.literal("[ANSWER]\n  \n[/ANSWER]") is None
        assert ml.literal("[ANSWER]\n" + "1" * 5000 + "\n[/ANSWER]") is None

    def test_a_whole_check_line_gives_its_literal(self):
        pre, suf = 'assert(candidate(("ab")) ==', ");"
        assert ml.literal('[ANSWER]\nassert(candidate(("ab")) == ("ba"));\n[/ANSWER]', pre, suf) == '("ba")'
        assert ml.literal('[ANSWER]assert(candidate( ("ab") )==("ba")) ;[/ANSWER]', pre, suf) == '("ba")'
        assert ml.literal('[ANSWER]\n("ba")\n[/ANSWER]', pre, suf) == '("ba")'

    @pytest.mark.parametrize(
        ("lang", "lit", "why"),
        [
            ("cpp", "1)) || true || ((1", "unbalanced"),
            ("cpp", "1; abort()", "separator"),
            ("cpp", '"a"\n"b"', "separator"),
            ("cpp", "1 // rest", "comment"),
            ("js", "`${1}`", "interpolation"),
            ("py", "f'{1}'", "interpolation"),
            ("py", "'abc", "unterminated"),
            ("py", "exit(0)", "process-control"),
            ("rb", '"#{1}"', "interpolation"),
            ("pl", "`ls`", "interpolation"),
            ("cs", '$"{1}"', "interpolation"),
            ("scala", 's"${x}"', "interpolation"),
            ("swift", '"\\(f())"', "interpolation"),
            ("sh", "a b", "shell word"),
            ("sh", "a*", "shell word"),
            ("sh", "$HOME", "shell word"),
            ("rkt", "1) (exit 0", "unbalanced"),
            ("lua", "1 -- x", "comment"),
        ],
    )
    def test_guard_refuses(self, lang, lit, why):
        assert why in (ml.guard(ml.LANGS[lang], lit) or "")

    @pytest.mark.parametrize(
        ("lang", "lit"),
        [
            ("cpp", 'std::vector<std::string>({(std::string)"a;b", (std::string)"//"})'),
            ("rs", "vec![0; 3]"),
            ("rs", 'String::from("a\\nb")'),
            ("js", '"a\nb"'),  # a newline inside a string literal
            ("sh", '"4 1\n2 3"'),
            ("sh", "'it''s'"),
            ("rkt", "(list #\\( #\\a)"),
            ("rkt", "#hash((1 . #f))"),
            ("py", "{'exit': (1, 2)}"),
            ("pl", "{1 => undef, 'a' => [1, 2]}"),
        ],
    )
    def test_guard_accepts(self, lang, lit):
        assert ml.guard(ml.LANGS[lang], lit) is None

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300), st.text(max_size=40), st.text(max_size=10))
    def test_extraction_and_guard_never_raise(self, body, pre, suf):
        for text in (body, f"[ANSWER]{body}[/ANSWER]", f"x[ANSWER]\n{pre}{body}{suf}"):
            lit = ml.literal(text, pre, suf)
            assert lit is None or (lit.strip() and len(lit) <= ml.MAX_ANSWER_CHARS)
        for lang in ml.LANGS.values():
            assert ml.guard(lang, body) is None or isinstance(ml.guard(lang, body), str)


def test_every_language_is_a_registered_task():
    assert sorted(ml.LANGS) == sorted(CRUXEVAL_X_LANGUAGES)
    assert GROUPS["multilingual"] == tuple(f"cruxeval-x-{lang}" for lang in CRUXEVAL_X_LANGUAGES)
    task = get_task("CRUXEval-X-CPP")
    assert (task.name, task.display, task.group, task.stop) == (
        "cruxeval-x-cpp",
        "CRUXEval-X C++",
        "multilingual",
        ("[/ANSWER]",),
    )
    assert {get_task(f"cruxeval-x-{lang}").display for lang in ml.LANGS} >= {"CRUXEval-X C#", "CRUXEval-X Bash"}


class TestRuntimes:
    def test_a_missing_tool_is_reported_and_judged_as_missing(self, monkeypatch):
        real = shutil.which
        monkeypatch.setattr(ml.shutil, "which", lambda name: real(name) if name == "bwrap" else None)
        task = ml.CRUXEvalX("cpp")
        assert task.probe() == "runtime missing: g++"
        assert ml.CRUXEvalX("cs").probe() == "runtime missing: csc or mcs"
        monkeypatch.setitem(ml._CACHE, "probe:cpp", task.probe())
        verdicts = task.judge([_item(SYNTH["cpp"])], [_answer("2")])
        assert [(v.passed, v.status, v.detail) for v in verdicts] == [
            (False, "runtime missing", "runtime missing: g++")
        ]

    def test_a_missing_extra_binary_is_named(self, monkeypatch):
        real = shutil.which
        monkeypatch.setattr(ml.shutil, "which", lambda name: None if name == "java" else real(name))
        if real("javac") is not None:
            assert ml.CRUXEvalX("java").probe() == "runtime missing: java"

    @pytest.mark.parametrize("lang", sorted(ml.LANGS))
    def test_unavailable_says_runtime_missing_or_nothing(self, lang):
        task = ml.CRUXEvalX(lang)
        why = task.unavailable()
        assert why is None or why.startswith("runtime missing: ")
        if not any(shutil.which(t) for t in ml.LANGS[lang].tools) and lang != "py":
            assert why is not None


@pytest.mark.parametrize("lang", sorted(SYNTH))
def test_right_wrong_illtyped_and_hostile_literals(lang):
    task = _task(lang, timeout_s=2.0)
    cases = CASES[lang]
    t0 = time.perf_counter()
    verdicts = task.judge([_item(SYNTH[lang])] * len(cases), [_answer(a) for a, _ in cases])
    got = [(a, v.status) for (a, _), v in zip(cases, verdicts, strict=True)]
    assert got == cases, [v.detail for v in verdicts]
    assert all(v.passed == (v.status == "pass") for v in verdicts)
    assert time.perf_counter() - t0 < 60


def test_identical_answers_run_once_and_agree(monkeypatch):
    task = _task("py")
    calls = []
    real = ml.execute
    monkeypatch.setattr(ml, "execute", lambda r, sources: calls.append(len(sources)) or real(r, sources))
    verdicts = task.judge([_item(SYNTH["py"])] * 4, [_answer("2"), _answer(" 2 "), _answer("3"), "none"])
    assert [v.status for v in verdicts] == ["pass", "pass", "fail", "no_answer"] and calls == [2]


@pytest.fixture(scope="module")
def sh_runner() -> ml.Runner:
    return _task("sh", timeout_s=3.0).runner()


class TestSandbox:
    """Bash programs straight through the runner: what the sandbox allows and what it ends."""

    def test_limits_and_isolation(self, sh_runner, tmp_path, monkeypatch):
        monkeypatch.setenv("CT_SECRET", "x")
        marker = tmp_path / "written"
        programs = {
            "fork bomb": "b() { b | b & }; b; sleep 30",
            "output flood": "yes",
            "file flood": "head -c 200M /dev/zero > /tmp/big",
            "network": "exec 3<>/dev/tcp/127.0.0.1/9",
            "host write": f"echo x > {marker}",
            "program dir": "echo x > /tmp/prog/new",
            "background": "(sleep 30 &); exit 0",
            "env": '[ -z "$CT_SECRET" ] && [ "$HOME" = /tmp ]',
            "uid": '[ "$(id -u)" != 0 ]',
            "memory": "python -c 'x = bytearray(6 << 30)'",
        }
        t0 = time.perf_counter()
        verdicts = dict(zip(programs, ml.execute(sh_runner, list(programs.values())), strict=True))
        elapsed = time.perf_counter() - t0
        status = {k: v.status for k, v in verdicts.items()}
        assert status == {
            "fork bomb": "timeout",
            "output flood": "fail",
            "file flood": "fail",
            "network": "fail",
            "host write": "fail",
            "program dir": "fail",
            "background": "pass",
            "env": "pass",
            "uid": "pass",
            "memory": "fail",
        }, {k: v.detail for k, v in verdicts.items()}
        assert not marker.exists() and elapsed < 60
        assert len(verdicts["output flood"].detail) <= 320


# --- the records and the oracle (../shared) -------------------------------------------------------


@pytest.mark.needs_shared
@pytest.mark.parametrize("lang", sorted(ml.LANGS))
def test_records_split_into_program_and_reference(lang, data_mirror, tmp_path):
    rows = [json.loads(x) for x in ml.data_path(lang, data_mirror, tmp_path).read_text().splitlines()]
    items = ml.CRUXEvalX(lang).load(data_mirror, tmp_path)
    assert len(items) == len(rows) == COUNTS[lang]
    missing = []
    for row, item in zip(rows, items, strict=True):
        ref = item.reference
        assert item.id == f"sample_{row['id']}" and ref["program"].count("????") == 1
        assert "????" in item.messages[0]["content"] and "[ANSWER]" in item.messages[0]["content"]
        if ref["expected"] is None:
            missing.append(row["id"])
            continue
        assert ref["program"].replace("????", ref["expected"]) == row["code"]
        assert ml.guard(ml.LANGS[lang], ref["expected"]) is None, (row["id"], ref["expected"])
    assert missing == NO_REFERENCE.get(lang, [])


def _oracle(lang: str, mirror: Path, cache: Path, n: int | None) -> None:
    task = _task(lang)
    items = task.load(mirror, cache)[:n]
    res = oracle_check(task, items)
    ids = {it.id for it in items}
    failures = {f["id"]: f["status"] for f in res["failures"]}
    known = {i: s for i, s in KNOWN_ORACLE_FAILURES[lang].items() if i in ids}
    unexpected = {i: s for i, s in failures.items() if i not in known and i not in FLAKY.get(lang, set())}
    assert not unexpected, [f for f in res["failures"] if f["id"] in unexpected]
    assert {i: s for i, s in failures.items() if i in known} == known


@pytest.mark.needs_shared
@pytest.mark.parametrize("lang", sorted(ml.LANGS))
def test_oracle_first_10(lang, data_mirror, tmp_path):
    _oracle(lang, data_mirror, tmp_path, 10)


@pytest.mark.slow
@pytest.mark.needs_shared
@pytest.mark.parametrize("lang", sorted(ml.LANGS))
def test_oracle_every_problem(lang, data_mirror, tmp_path):
    _oracle(lang, data_mirror, tmp_path, None)
