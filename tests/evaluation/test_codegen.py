"""Code-generation benchmarks (HumanEval, HumanEval+, MBPP, MBPP+): the oracle on the real data,
wrong and hostile answers, answer extraction, the sandbox runner (its imports, its modes, EvalPlus's
comparison rules), pass@k end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.data.io import RecordError
from codethinker.engines.base import Completion
from codethinker.evaluation import codegen, codegen_oracle, codegen_runner
from codethinker.evaluation.codegen import CodegenTask, extract_code, make_item, read_items
from codethinker.evaluation.generalize import GROUPS, GenConfig, Item, evaluate_task, get_task, oracle_check
from codethinker.sandbox.runners import RUNNERS, load_runners

# --------------------------------------------------------------------------- tiny benchmarks (no data)
ADD_PROMPT = 'def add(a, b):\n    """Return a + b.\n    >>> add(1, 2)\n    3\n    """\n'
RECORDS = {
    "humaneval": {
        "task_id": "T/0",
        "prompt": ADD_PROMPT,
        "entry_point": "add",
        "canonical_solution": "    return a + b\n",
        "test": "\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n",
    },
    "mbpp": {
        "task_id": 1,
        "prompt": "Write a function to add two numbers.",
        "code": "def add(a, b):\n    return a + b\n",
        "test_list": ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert math.floor(add(0, 0)) == 0"],
        "test_imports": ["import math"],
    },
}
RECORDS["humaneval+"] = {**RECORDS["humaneval"], "base_input": [[1, 2], [0, 0]], "plus_input": [[10**6, 1], [-5, 5]]}
RECORDS["humaneval+"]["atol"] = 0
RECORDS["mbpp+"] = {
    "task_id": "Mbpp/1",
    "prompt": '"""\nWrite a function to add two numbers.\nassert add(1, 2) == 3\n"""\n',
    "entry_point": "add",
    "canonical_solution": "\ndef add(a, b):\n    return a + b\n",
    "base_input": [[1, 2], [0, 0]],
    "plus_input": [[10**6, 1], [-5, 5]],
    "atol": 0,
}
NAMES = ("humaneval", "humaneval+", "mbpp", "mbpp+")
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
BASE_ONLY = "```python\ndef add(a, b):\n    return {(1, 2): 3, (0, 0): 0}.get((a, b), 0)\n```"


def tiny(name: str) -> tuple[CodegenTask, Item]:
    task = get_task(name)
    assert isinstance(task, CodegenTask)
    rec = codegen._check(RECORDS[name], name, Path("tiny"), 1)
    return task, make_item(name, rec, Path("tiny"), 1)


def fenced(body: str) -> str:
    return f"Here it is:\n```python\n{body}\n```\n\nIt adds."


def test_registered_tasks() -> None:
    assert RUNNERS["tests"] == "codethinker.evaluation.codegen_runner:tests_runner"
    assert load_runners(RUNNERS)["tests"] is codegen_runner.tests_runner is codegen.tests_runner
    tasks = [get_task(n) for n in GROUPS["codegen"]]
    assert [(t.name, t.display, t.group) for t in tasks] == [
        ("humaneval", "HumanEval", "codegen"),
        ("humaneval+", "HumanEval+", "codegen"),
        ("mbpp", "MBPP", "codegen"),
        ("mbpp+", "MBPP+", "codegen"),
    ]
    assert all(t.stop == ("\n```\n\n",) and t.unavailable() is None for t in tasks)


def test_the_runner_imports_the_stdlib_and_sandbox_helpers_only() -> None:
    """It is imported inside the sandbox worker: no generalize, data, sandbox or third-party modules."""
    code = (
        "import json, sys; before = set(sys.modules); import codethinker.evaluation.codegen_runner; "
        "print(json.dumps([m for m in set(sys.modules) - before if m.split('.')[0] not in sys.stdlib_module_names]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    allowed = {"codethinker.sandbox", "codethinker.sandbox.runners", "codethinker.sandbox.protocol"}
    allowed |= {f"codethinker.sandbox.protocol.{m}" for m in ("base", "decoding", "encoding")}
    allowed |= {"codethinker.sandbox.worker", "codethinker.sandbox.worker.capture"}
    allowed |= {"codethinker", "codethinker.evaluation", "codethinker.evaluation.codegen_runner"}
    assert set(json.loads(out)) <= allowed, out


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes_wrong_fails(name: str) -> None:
    task, item = tiny(name)
    texts = [task.reference_text(item), WRONG, BASE_ONLY, "I cannot solve this."]
    v = task.judge([item] * len(texts), texts)
    assert [x.status for x in v[:3]] == ["pass", "fail", "pass" if not task.plus else "fail"]
    assert [x.passed for x in v] == [True, False, not task.plus, False]
    assert v[3].status == "error"  # prose is not code: a SyntaxError
    if task.plus:  # EvalPlus's plus inputs catch the answer that only knows the base tests
        assert v[1].detail.startswith("0/4 passed; base input 0 (1, 2): got -1, expected 3")
        assert "plus input 0" in v[2].detail and v[2].detail.startswith("2/4 passed")
    else:
        assert "assert" in v[1].detail


@pytest.mark.parametrize("name", ["humaneval", "humaneval+"])
def test_humaneval_style_answers(name: str) -> None:
    task, item = tiny(name)
    texts = [
        fenced("    return a + b"),  # the body: continues the prompt
        "    return a + b\n",  # a base model's raw continuation
        fenced("def add(a, b):\n    return b + a") + "\nUsage:\n```python\nprint(add(1, 2))\n```",
        "Usage first:\n```python\nprint(add(1, 2))\n```\n" + fenced("def add(a, b):\n    return a + b"),
        "```bash\npip install nothing\n```",
        "",
        fenced("def add(a, b):\n    raise ValueError('no')"),
        fenced("def add(a, b) return"),
        fenced("def plus(a, b):\n    return a + b"),  # no def of the entry point: a continuation, wrong
    ]
    got = [(v.passed, v.status) for v in task.judge([item] * len(texts), texts)]
    assert got[:4] == [(True, "pass")] * 4
    assert got[4:] == [(False, "no_answer"), (False, "no_answer"), (False, "error"), (False, "error"), (False, "fail")]


# --------------------------------------------------------------------------- hostile answers
HOSTILE = {
    "loop": ("def add(a, b):\n    while True:\n        pass", {"timeout"}),
    # EFBIG past RLIMIT_FSIZE; on a loaded machine the io modes' 1 s per input may end it first
    "write": ("def add(a, b):\n    open('x', 'w').write('a' * 10**8)\n    return a + b", {"error", "timeout"}),
    "write_root": ("def add(a, b):\n    open('/etc/evil', 'w').write('x')\n    return a + b", {"error"}),
    "exit_in_function": ("import sys\ndef add(a, b):\n    sys.exit(0)", {"error"}),
    "exit_at_module": ("import sys\nsys.exit(0)\ndef add(a, b):\n    return a + b", {"error"}),
    "os_exit": ("import os\ndef add(a, b):\n    os._exit(0)", {"killed"}),
    "fork": ("import os\ndef add(a, b):\n    os.fork()\n    return a + b", {"error"}),
    "socket": (
        "import socket\ndef add(a, b):\n    socket.create_connection(('1.1.1.1', 80), timeout=1)\n    return a + b",
        {"error"},
    ),
    "memory": ("def add(a, b):\n    x = [0] * 10**10\n    return a + b", {"memory"}),
    "bytes": ("def add(a, b):\n    return bytearray(8 * 2**30)", {"memory"}),
    "liar": ("def add(a, b):\n    class X:\n        pass\n    return X()", {"fail"}),
}


@pytest.mark.parametrize("name", NAMES)
def test_hostile_answers_end_with_a_status(name: str) -> None:
    task, item = tiny(name)
    texts = [fenced(code) for code, _ in HOSTILE.values()]
    t0 = time.perf_counter()
    verdicts = task.judge([item] * len(texts), texts)
    got = {k: v.status for k, v in zip(HOSTILE, verdicts, strict=True)}
    assert not any(v.passed for v in verdicts), got
    assert all(got[k] in want for k, (_, want) in HOSTILE.items()), (got, [v.detail for v in verdicts])
    assert time.perf_counter() - t0 < 60
    assert "x" not in {p.name for p in Path.cwd().iterdir()}


@pytest.mark.parametrize("name", ["humaneval", "humaneval+"])
def test_code_that_swallows_the_timer_is_killed(name: str) -> None:
    """The parent kills it GRACE_S after the job's time (test program, or io job)."""
    task, item = tiny(name)
    swallow = "def add(a, b):\n    while True:\n        try:\n            while True:\n                pass\n"
    swallow += "        except BaseException:\n            pass"
    task.judge([item], [task.reference_text(item)])  # the canonical run, out of the timing
    t0 = time.perf_counter()
    (v,) = task.judge([item], [fenced(swallow)])
    assert (v.passed, v.status) == (False, "timeout") and v.detail.startswith("Timeout: killed after")
    assert time.perf_counter() - t0 < (4.0 if name == "humaneval" else 7.0) + codegen.GRACE_S + 3.0


def test_per_input_time_limit_stops_a_loop_early() -> None:
    """One io job whose third input loops: EvalPlus's 1 s per-input limit ends it, not the job's."""
    task, item = tiny("humaneval+")
    loop = fenced("def add(a, b):\n    while a == 10**6:\n        pass\n    return a + b")
    task.judge([item], [task.reference_text(item)])  # the canonical run, out of the timing
    t0 = time.perf_counter()
    (v,) = task.judge([item], [loop])
    assert v.status == "timeout" and v.detail.startswith("2/4 passed; plus input 0 (1000000, 1): over 1.00 s")
    assert time.perf_counter() - t0 < 6.0


# --------------------------------------------------------------------------- EvalPlus's comparison
@pytest.mark.parametrize(
    ("out", "exp", "atol", "special", "ok"),
    [
        (3, 3, 0, None, True),
        (3.0, 3, 0, None, True),  # == holds across int and float
        (0.30000000000000004, 0.3, 0, None, True),  # float expected: atol 1e-6
        (0.3001, 0.3, 0, None, False),
        (0.3001, 0.3, 1e-3, None, True),
        ([1.0, 2.0000001], [1.0, 2.0], 0, None, True),
        ((1.0, 2.0000001), [1.0, 2.0], 0, None, False),  # a float comparison wants the same type
        ([1.0], [1.0, 2.0], 0, None, False),
        (float("nan"), float("nan"), 0, None, False),
        (float("inf"), float("inf"), 0, None, True),
        ("a", "a", 0, None, True),
        ((4, 5), (5, 4), 0, "set_eq", True),
        (None, False, 0, "not_none", True),
        ("match", True, 0, "not_none", True),
        (False, True, 0, "not_none", False),
        (12, 3, 0, "are_equivalent", True),
        (0, 5, 0, "sum_div", True),
        (1.0, [[-1, 1]], 1e-4, "find_zero", True),  # a root of -1 + x
        (2.0, [[-1, 1]], 1e-4, "find_zero", False),
    ],
)
def test_evalplus_comparison(out, exp, atol, special, ok) -> None:
    inp = exp if special == "find_zero" else [1]
    exp = None if special == "find_zero" else exp
    assert codegen_oracle.matches(out, exp, inp, atol, special)[0] is ok


def test_sticky_atol_and_second_answers() -> None:
    assert codegen_oracle.matches(1.0, 1.0, [1], 0, None) == (True, 1e-6)
    assert codegen_oracle.second_answer("digit_distance_nums", [123, 45]) == 1 + 2 + 2  # 123 against 045
    assert codegen_oracle.second_answer("surface_Area", [2, 0]) == 8
    assert codegen_oracle.matches(35, 0, [3, 4], 0, "surface_Area") == (True, 0)


def test_mbpp_plus_inputs_are_deserialized_as_evalplus_does() -> None:
    rules = codegen._MBPP_PLUS_RULES
    assert rules[2]([[1, 2], [3]]) == [(1, 2), (3,)]
    assert rules[63]([[[1, 2], [3, 4]]]) == [[(1, 2), (3, 4)]]
    assert rules[115]([[[1], [], [2, 3]]]) == [[{1}, {}, {2, 3}]]
    assert rules[124](["1.5", "(1+2j)"]) == [1.5, 1 + 2j]
    assert rules[580]([[1, [2, [3]]]]) == ((1, (2, (3,))),)
    assert len(rules) == 22 + 15 + 4 + 2 + 8 + 3 + 1 + 1 + 1 + 1 + 1 + 3


def test_runner_in_process() -> None:
    """The runner without a sandbox (no timer): program, io and reference modes."""
    ns: dict = {}
    exec("def add(a, b):\n    return a + b", ns)
    run = codegen_runner.tests_runner
    prog = {"mode": "program", "entry": "add", "setup": "import math", "tests": ["assert add(1, 1) == 2"], "limit": 5}
    assert run(ns["add"], (), {}, prog) == {"status": "pass", "passed": 1, "total": 1, "detail": ""}
    ref = run(ns["add"], (), {}, {"mode": "reference", "phases": [[[1, 2]], [["a", "b"]]], "not_none": False})
    assert [p["outputs"] for p in ref["phases"]] == [[3], ["ab"]]
    phase = {"inputs": [[1, 2], [2, 2]], "limits": [1.0, 1.0], "budget": 2.0, "digest": [1]}
    out = run(ns["add"], (), {}, {"mode": "io", "phases": [phase]})
    assert out == {"phases": [[["v", 3], ["d", codegen_runner.digest(4)]]], "stop": None}  # outputs, no verdict
    expect = [{"name": "base", "inputs": phase["inputs"], "outputs": [4, codegen_runner.digest(4)], "digest": [1]}]
    v = codegen_oracle.io_verdict(out, expect, 0, None)
    assert (v.passed, v.status, v.detail) == (False, "fail", "0/2 passed; base input 0 (1, 2): got 3, expected 4")
    with pytest.raises(ValueError, match="unknown tests mode"):
        run(ns["add"], (), {}, {"mode": "nope"})


def test_big_outputs_are_compared_by_digest_and_no_expected_output_enters_the_job() -> None:
    task, item = tiny("humaneval+")
    ref = {**item.reference, "base_input": [["x", 10**6]], "plus_input": [["y", 3]]}
    ref["prompt"] = ref["prompt"].replace("a + b", "a * b")
    ref["solution"] = ref["prompt"] + "    return a * b\n"
    item = Item("T/big", item.messages, ref)
    right, wrong = fenced("def add(a, b):\n    return a * b"), fenced("def add(a, b):\n    return a * (b - 1)")
    spy = fenced("import sys\ndef add(a, b):\n    raise RuntimeError(repr(sys._getframe(2).f_locals)[:3000])")
    v = task.judge([item, item, item], [right, wrong, spy])
    assert task._expected[("T/big", None)]["phases"][0]["digest"] == [0]
    assert [x.status for x in v] == ["pass", "fail", "error"]
    assert "got a digest other than the expected output's" in v[1].detail
    assert "'digest': [0]" in v[2].detail and "'outputs'" not in v[2].detail and "yyy" not in v[2].detail, v[2].detail


def test_forged_io_frames_cost_only_their_own_answer() -> None:
    """Frames a candidate may forge: each is its own answer's error, never an exception, never a pass."""
    phases = [{"name": "base", "inputs": [[1, 2]], "outputs": [3], "digest": []}]
    forged = [
        None,
        7,
        {"phases": 10**5000},
        {"phases": [[["v", 3]], [["v", 3]]]},
        {"phases": [[["x", 3]]]},
        {"phases": [[]], "stop": {"phase": 0, "index": 0, "status": 10**5000}},
        {"phases": [[]], "stop": {"phase": 0, "index": 0, "status": "timeout", "detail": 10**5000}},
        {"phases": [[["v", {1: 2}]]]},
        {"phases": [[["d", "abc"]]]},
        {"phases": [[["v", [[[]]]]]]},
    ]
    for value in forged:
        v = codegen_oracle.io_verdict(value, phases, 0, None)
        assert not v.passed and v.status in ("error", "fail", "timeout"), (value, v)
    res = type("R", (), {"status": "ok", "value": {"status": "pass", "passed": 10**5000, "total": 1}})()
    assert codegen._verdict(res).status == "error"
    odd = type("R", (), {"status": "error", "error_type": 10**5000, "error_message": ["x"]})()
    assert codegen._verdict(odd).status == "error"


# --------------------------------------------------------------------------- answer extraction
@settings(max_examples=300, deadline=None)
@given(st.text(), st.one_of(st.none(), st.sampled_from(["add", "f", "has_close_elements"])))
def test_extraction_never_raises(text: str, entry: str | None) -> None:
    code = extract_code(text, entry)
    assert isinstance(code, str)
    assert code == "" or code.strip()


LINE = st.text(st.characters(blacklist_categories=["Cs", "Cc", "Zl", "Zp"], blacklist_characters="`"), max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.lists(LINE, max_size=8), st.sampled_from(["python", "py", "Python3", ""]), st.booleans())
def test_extraction_returns_the_block(lines: list[str], tag: str, closed: bool) -> None:
    body = "\n".join(lines)
    text = f"Sure, here:\n```{tag}\n{body}\n" + ("```\n\nThat is all." if closed else "")
    assert extract_code(text, "add") == (body + "\n" if body.strip() else "")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("def add(a, b):\n    return a + b", "def add(a, b):\n    return a + b"),
        ("```python\nx = 1\n```\n```python\ndef add(a, b):\n    pass\n```", "def add(a, b):\n    pass\n"),
        ("```python\nx = 1\n```\n```python\ny = 2\n```", "x = 1\n"),
        ("  ```python\n  def add(a, b):\n      pass\n  ```", "def add(a, b):\n    pass\n"),
        ("```text\nhello\n```", ""),
        ("```python\n```", ""),
        ("```python\n  \n```\nx = 1", ""),
        ("   \n", ""),
    ],
)
def test_extraction_examples(text: str, code: str) -> None:
    assert extract_code(text, "add") == code


@settings(max_examples=5, deadline=None)
@given(st.lists(st.text(max_size=200), min_size=1, max_size=12))
def test_judge_never_raises_on_arbitrary_text(texts: list[str]) -> None:
    task, item = tiny("mbpp")
    verdicts = task.judge([item] * len(texts), texts)
    assert len(verdicts) == len(texts) and all(v.status in {"fail", "error", "no_answer"} for v in verdicts)


# --------------------------------------------------------------------------- pass@k end to end
class ScriptedEngine:
    """Answers the i-th sample of a prompt with ``answers[prompt][i]``."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return "".join(f"<|{m['role']}|>{m['content']}" for m in messages) + "<|assistant|>"

    def continue_prefixes(self, prefixes, n, *, stop, max_tokens, temperature=1.0, seed=None):
        assert stop == ["\n```\n\n"]
        return [[Completion(t, len(t.split()), "stop") for t in self.answers[p][:n]] for p in prefixes]


def test_pass_at_1_through_evaluate_task() -> None:
    task, add = tiny("humaneval")
    rec = {**RECORDS["humaneval"], "task_id": "T/1", "prompt": ADD_PROMPT.replace("add", "sub").replace("+", "-")}
    rec["test"] = "def check(candidate):\n    assert candidate(3, 1) == 2\n"
    rec["entry_point"] = "sub"
    sub = make_item("humaneval", rec, Path("tiny"), 2)
    engine = ScriptedEngine({})
    good_add, good_sub = task.reference_text(add), fenced("def sub(a, b):\n    return a - b")
    engine.answers[engine.apply_chat_template(add.messages)] = [good_add, WRONG, good_add, "```python\n```"]
    engine.answers[engine.apply_chat_template(sub.messages)] = [WRONG, WRONG, WRONG, good_sub]
    records, metrics = evaluate_task(engine, task, [add, sub], GenConfig(n=4))
    assert [r["passed"] for r in records] == [1, 0, 1, 0, 0, 0, 0, 1]
    assert metrics["pass1"] == pytest.approx((0.5 + 0.25) / 2)
    assert metrics["statuses"] == {"pass": 3, "fail": 4, "no_answer": 1}
    assert metrics["n_problems"] == 2 and metrics["n_answers"] == 8


# --------------------------------------------------------------------------- records
def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(
    ("name", "change", "field"),
    [
        ("humaneval", {"entry_point": "not an identifier"}, "entry_point"),
        ("humaneval", {"test": None}, "test"),
        ("humaneval+", {"base_input": [1, 2]}, "base_input"),
        ("humaneval+", {"atol": -1}, "atol"),
        ("mbpp+", {"plus_input": "x"}, "plus_input"),
        ("mbpp", {"test_list": []}, "test_list"),
        ("mbpp", {"code": "def other(a, b):\n    return a + b"}, "code"),
        ("mbpp", {"task_id": "1"}, "task_id"),
    ],
)
def test_malformed_records_name_file_row_field(tmp_path: Path, name: str, change: dict, field: str) -> None:
    rows = [RECORDS[name], {**RECORDS[name], **change}]
    path = tmp_path / "data.json"
    if name == "mbpp":
        path.write_text(json.dumps(rows))
    else:
        write_jsonl(path, rows)
    with pytest.raises(RecordError) as info:
        read_items(name, path)
    assert (info.value.row, info.value.field) == (2, field) and str(path) in str(info.value)


def test_missing_field_and_bad_file(tmp_path: Path) -> None:
    rec = dict(RECORDS["mbpp+"])
    del rec["canonical_solution"]
    with pytest.raises(RecordError, match="row 1, field 'canonical_solution': missing field"):
        read_items("mbpp+", write_jsonl(tmp_path / "a.jsonl", [rec]))
    (tmp_path / "b.json").write_text("{}")
    with pytest.raises(RecordError, match="JSON array"):
        read_items("mbpp", tmp_path / "b.json")


# --------------------------------------------------------------------------- the real benchmarks
SIZES = {"humaneval": 164, "humaneval+": 164, "mbpp": 427, "mbpp+": 378}
KNOWN_FAILURES: dict[str, list[dict]] = {name: [] for name in SIZES}  # every canonical solution passes


@pytest.fixture(scope="module")
def items(data_mirror: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Item]]:
    cache = tmp_path_factory.mktemp("codegen-cache")
    return {name: get_task(name).load(data_mirror, cache) for name in SIZES}


@pytest.mark.needs_shared
def test_loads_every_problem(items: dict[str, list[Item]]) -> None:
    assert {k: len(v) for k, v in items.items()} == SIZES
    assert items["humaneval"][0].id == "HumanEval/0" and items["mbpp"][0].id == "Mbpp/2"
    for name, its in items.items():
        assert len({it.id for it in its}) == len(its), name
        assert all(it.reference["entry_point"] in it.messages[0]["content"] for it in its), name
    mbpp = {it.id: it.reference["entry_point"] for it in items["mbpp"]}
    assert all(mbpp[it.id] == it.reference["entry_point"] for it in items["mbpp+"])
    by_id = {it.id: it for it in items["mbpp+"]}
    assert by_id["Mbpp/793"].reference["plus_input"] == []  # `{}` in the release: no plus inputs
    assert sum(len(it.reference["plus_input"]) for it in items["humaneval+"]) == 122_683
    assert sum(len(it.reference["base_input"]) for it in items["mbpp+"]) == 1_174


@pytest.mark.needs_shared
@pytest.mark.parametrize("name", list(SIZES))
def test_real_problems_wrong_answer_fails(name: str, items: dict[str, list[Item]]) -> None:
    task = get_task(name)
    its = items[name][:3]
    wrong = [f"```python\ndef {it.reference['entry_point']}(*args):\n    return None\n```" for it in its]
    verdicts = task.judge(its + its, [task.reference_text(it) for it in its] + wrong)
    assert [v.passed for v in verdicts] == [True] * 3 + [False] * 3, [v.detail for v in verdicts]


@pytest.mark.slow
@pytest.mark.needs_shared
@pytest.mark.parametrize("name", list(SIZES))
def test_oracle_every_canonical_solution_passes(name: str, items: dict[str, list[Item]]) -> None:
    """Every reference answer is judged a pass on the full benchmark (base and plus inputs).
    Wall times on the 2-core dev machine: HumanEval ~3 s, MBPP ~13 s, HumanEval+ ~55 s, MBPP+ ~150 s."""
    task = get_task(name)
    t0 = time.perf_counter()
    report = oracle_check(task, items[name])
    print(f"\n{name}: {report['passed']}/{report['n']} in {time.perf_counter() - t0:.1f} s")
    assert report["n"] == SIZES[name]
    assert report["failures"] == KNOWN_FAILURES[name]
    assert report["passed"] == SIZES[name] - len(KNOWN_FAILURES[name])
