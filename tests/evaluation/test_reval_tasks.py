"""REval-CO/-C/-P/-S (codethinker/evaluation/reval_tasks.py and its reval_prompts, reval_runner,
reval_answers): the prompts' pieces and worked examples (run, and read back), the tracer's semantics on
small programs in the sandbox, REval's answer readers and scoring, hostile answers, one evaluation through
the Engine contract, and on the mirror: counts, the stored-vs-executed cross-check and the oracle of every
item."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.engines.base import Completion
from codethinker.evaluation.generalize import GenConfig, Item, evaluate_task, get_task, oracle_check
from codethinker.evaluation.reval_prompts import (
    ANSWER_FORMAT,
    CLASS_CALL,
    EXAMPLES,
    HEADS,
    PRELUDE,
    SETUP_HEAD,
    SYSTEM,
    chat,
    output_prompt,
    probe_prompt,
)
from codethinker.evaluation.reval_tasks import (
    NIL,
    STUB,
    RevalClassOutput,
    RevalCoverage,
    RevalPath,
    RevalState,
    answer_source,
    cross_check,
    ground_truth,
    output_question,
    path_lines,
    read_coverage,
    read_path,
    read_state,
    state_matches,
    state_text,
)


def _ans(body: str) -> str:
    return f"[THOUGHT]\nsteps\n[/THOUGHT]\n[ANSWER]\n{body}\n[/ANSWER]"


def _val(v, t=None, exact=True):
    return {"type": t or type(v).__name__, "exact": exact, "plain": v, "repr": repr(v)}


def test_the_sandbox_knows_the_runner():
    from codethinker.sandbox import RUNNERS

    assert RUNNERS["reval"] == "codethinker.evaluation.reval_runner:reval_runner"


def test_the_runner_imports_the_standard_library_only():
    code = (
        "import sys; before = set(sys.modules); import codethinker.evaluation.reval_runner; "
        "print(sorted({m.split('.')[0] for m in set(sys.modules) - before} - set(sys.stdlib_module_names)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['codethinker']"


# --------------------------------------------------------------------------- the runner, in the sandbox
FUNC = """def f(a, b):
    ans = a + b
    if ans > 0:
        ans = int(a)
    else:
        ans = b
    return g(ans)

def g(y):
    return "v %s %s" % (y, y)
"""
CLASS = """class A:
    def __init__(self):
        self.x = []

    def f(self, y):
        self.x.append(y)
        z = self.g(y)
        return z

    def g(self, y):
        return y * 2
"""
TEST = """import unittest

class ATestF(unittest.TestCase):
    def setUp(self):
        self.a = A()

    def test_f(self):
        self.assertEqual(self.a.f(3), 6)

class ATestOther(unittest.TestCase):
    def test_g(self):
        a = A()
        self.assertEqual(a.g(1), 2)
"""


def _run(jobs):
    from codethinker.sandbox import Job, Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(timeout_s=10, workers=2)) as sb:
        return sb.map([Job(STUB, entry="codethinker_reval_", runner="reval", options=o) for o in jobs])


def _truth_opt(code, probes, **kw):
    return {"mode": "truth", "code": code, "probes": probes, "test": None, "test_index": 0, **kw}


def test_runner_records_revals_states():
    probes = [[4, "ans"], [6, "ans"], [2, "(a, b)"], [7, "ans"], [10, "y"]]
    func = _truth_opt(FUNC, probes, entry="f", input="(1.1, 2,)")
    cls = _truth_opt(CLASS, [[3, "self.x"], [6, "self.x"], [7, "z"], [11, "y"], [8, "z"]], entry="A", test=TEST)
    other = {**cls, "test_index": 1, "probes": [[3, "self.x"]]}
    r_func, r_cls, r_other = (r.value for r in _run([func, cls, other]))
    p = r_func["probes"]
    assert [x["covered"] for x in p] == [True, False, True, True, True]
    assert p[0]["next"] == [7] and p[1]["next"] == [-1] and p[4]["next"] == [7]
    assert p[3]["next"] == [-1, 10]  # line 7 twice: the call (g's def head, a 3.11 line event, is dropped)
    assert p[0]["values"] == [_val(1)] and p[1]["values"] is None  # and its return, the last state
    assert p[2]["values"] == [_val((1.1, 2))]  # REval: a tuple of every combination
    assert p[4]["values"] is None  # the state after: f's return event, a state without locals
    assert r_func["output"] == _val("v 1 1")
    q = r_cls["probes"]  # setUp ran untraced: __init__ (line 3) is not in the trace
    assert not q[0]["covered"] and q[1]["next"] == [7] and q[2]["next"] == [11]
    assert q[1]["values"] == [_val([3])] and q[3]["values"] == [_val(3)] and q[2]["values"] is None
    assert q[4]["values"] == [_val(6)]  # the last state reads its own locals
    assert r_cls["setup"].startswith("    def setUp(self):") and r_cls["shown"] == "assertEqual(self.a.f(3), 6)\n"
    assert r_other["probes"][0]["covered"] and r_other["n_classes"] == 2 and r_other["setup"] == ""


def test_runner_judges_a_class_output_answer():
    base = {"mode": "answer", "code": CLASS, "test": TEST, "entry": "A", "test_index": 0}
    good, _ = answer_source(_ans("assertEqual(self.a.f(3), 6)"), "assertEqual(self.a.f(3), ??)")
    bad, _ = answer_source(_ans("assertEqual(self.a.f(3), 7)"), "assertEqual(self.a.f(3), ??)")
    ok, wrong = _run([{**base, "answer": good}, {**base, "answer": bad}])
    assert ok.status == "ok" and ok.value is True
    assert wrong.status == "error" and wrong.error_type == "AssertionError"


def test_class_output_answers_run_only_in_the_sandbox():
    ref = {"code": CLASS, "test": TEST, "entry": "A", "test_index": 0, "question": "assertEqual(self.a.f(3), ??)"}
    item = Item("x", [], {**ref, "answer": "assertEqual(self.a.f(3), 6)"})
    texts = [
        RevalClassOutput().reference_text(item),
        _ans("assertEqual(self.a.f(3), 6)\nwhile True: pass"),
        _ans("open('/tmp/reval_co_pwned', 'w').write('x')\nassertEqual(self.a.f(3), 6)"),
        _ans("import os\nos.fork()\nassertEqual(self.a.f(3), 6)"),
        _ans("assertEqual(self.a.f(3), 6)\n" + "x = [" * 300),
        "garbage",
        _ans("x = [0] * 10**10\nassertEqual(self.a.f(3), 6)"),
        _ans("import os\nos._exit(0)\nassertEqual(self.a.f(3), 6)"),
        _ans("raise SystemExit\nassertEqual(self.a.f(3), 6)"),
    ]
    verdicts = RevalClassOutput(timeout_s=1.0).judge([item] * len(texts), texts)
    statuses = [v.status for v in verdicts]
    assert statuses[:2] == ["pass", "timeout"] and verdicts[0].passed and not any(v.passed for v in verdicts[1:])
    assert statuses[2:] == ["error", "error", "no_answer", "no_answer", "memory", "killed", "error"]
    assert not Path("/tmp/reval_co_pwned").exists()


# --------------------------------------------------------------------------- the prompts
FUNC_ROW = {"code": FUNC, "entry_point": "f", "inputs": ["(1.1, 2,)"], "test": None}
CLASS_ROW = {"code": CLASS, "entry_point": "A", "inputs": ["assertEqual(self.a.f(3), 6)\n"], "test": TEST}
CLASS_RUN = {"setup": "    def setUp(self):\n        self.a = A()\n"}
TASKS = {"coverage": RevalCoverage, "path": RevalPath, "state": RevalState, "output": RevalClassOutput}


def _split(kind, text):
    """The instructions and worked examples, and the item's query, after checking the first."""
    head, query = text[: len(HEADS[kind])], text[len(HEADS[kind]) :]
    assert head == HEADS[kind] and ANSWER_FORMAT[kind] in head
    assert all(tag in head for tag in ("[THOUGHT]", "[/THOUGHT]", "[ANSWER]", "[/ANSWER]"))
    assert query.startswith("[PYTHON]\n") and query.endswith("\n[THOUGHT]") and "[ANSWER]" not in query
    return query


@pytest.mark.parametrize("kind", ["coverage", "path", "state"])
def test_probe_prompts_show_the_program_the_run_and_the_probe(kind):
    query = _split(kind, probe_prompt(kind, FUNC_ROW, {}, 0, {"lineno": 4, "var": "ans"}))
    code = "".join(f"{n}\t{x}\n" for n, x in enumerate(FUNC.split("\n"), 1)) if kind == "path" else FUNC
    assert query.startswith(f"[PYTHON]\n{code}\nf(1.1, 2)\n[/PYTHON]\n[QUESTION]\n")
    assert "`        ans = int(a)`" in query and "f(1.1, 2) runs" in query and query.endswith("[/QUESTION]\n[THOUGHT]")
    assert ("Line 4 " in query) is (kind != "path")  # REval's P names the line by its code only
    assert (" of ans " in query) is (kind == "state")
    query = _split(kind, probe_prompt(kind, CLASS_ROW, CLASS_RUN, 0, {"lineno": 6, "var": "self.x"}))
    setup = SETUP_HEAD + ("# " if kind == "path" else "") + "        self.a = A()\n# \nassertEqual(self.a.f(3), 6)"
    assert query.startswith(f"[PYTHON]\n{CLASS}\n{setup}\n[/PYTHON]\n[QUESTION]\n")
    assert "`        self.x.append(y)`" in query and f"{CLASS_CALL} runs" in query
    assert ("Line 6 " in query) is (kind != "path") and (" of self.x " in query) is (kind == "state")


def test_the_output_prompt_shows_the_program_the_setup_and_the_question():
    query = _split("output", output_prompt(CLASS_ROW, CLASS_RUN, "assertEqual(self.a.f(3), ??)"))
    setup = f"{SETUP_HEAD}#         self.a = A()\n# "
    assert query == f"[PYTHON]\n{CLASS}\n{setup}{PRELUDE}assertEqual(self.a.f(3), ??)\n[/PYTHON]\n[THOUGHT]"
    assert chat(query) == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": query}]


def _written(kind):
    """Each worked example's reasoning and answer as the prompt shows them: what a model writes."""
    chunks = HEADS[kind].split("\n[/ANSWER]\n\n")[:-1]
    return [c[c.rindex("[THOUGHT]\n") + len("[THOUGHT]") :] + "\n[/ANSWER]" for c in chunks]


def _example_test(entry, test_code):
    """A unittest class the runner finds (``<entry>Test*``) whose test method is the test code."""
    body = "".join(f"        {x.replace('assert', 'self.assert')}\n" for x in test_code.strip().split("\n"))
    return f"import unittest\n\nclass {entry}TestExample(unittest.TestCase):\n    def test_example(self):\n{body}"


def test_the_worked_examples_are_right_and_read_back():
    """Every worked example, as the prompt shows it, is judged right by its task: its answer is read back
    by the task's reader and agrees with the truth of its program run in the sandbox."""
    cases = [(k, ex, text) for k in EXAMPLES for ex, text in zip(EXAMPLES[k], _written(k), strict=True)]
    assert [k for k, _, _ in cases] == ["coverage"] * 2 + ["path"] * 3 + ["state"] * 3 + ["output"] * 2
    assert all(text.endswith(f"[/THOUGHT]\n[ANSWER]\n{ex.answer}\n[/ANSWER]") for _, ex, text in cases)
    assert {ex.answer for _, ex, _ in cases} >= {"YES", "NO", "-1", NIL}
    probed = [(k, ex, text) for k, ex, text in cases if k != "output"]
    opts = []
    for _, ex, _ in probed:
        run = {"test": _example_test(ex.entry, ex.run)} if ex.test else {"input": ex.run}
        opts.append(_truth_opt(ex.code, [[ex.line, ex.var]], entry=ex.entry, **run))
    for (kind, ex, text), r in zip(probed, _run(opts), strict=True):
        assert r.status == "ok", (ex.entry, r.error_message)
        ref = {**r.value["probes"][0], "line": ex.line, "var": ex.var, "code": ex.code}
        (v,) = TASKS[kind]().judge([Item(ex.entry, [], ref)], [text])
        assert v.passed, (kind, ex.entry, v.detail)
    (fn, fn_text), (cls, cls_text) = ((ex, text) for _, ex, text in cases[-2:])
    exec(f"{fn.code}\n{fn.answer}\n", {})  # the function example's completed assert holds
    assert not fn.test and "??" in fn.run and fn_text.endswith(f"\n{fn.answer}\n[/ANSWER]")
    ref = {"code": cls.code, "test": _example_test(cls.entry, cls.answer), "entry": cls.entry, "test_index": 0}
    (v,) = RevalClassOutput().judge([Item("co", [], {**ref, "question": cls.run})], [cls_text])
    assert v.passed and output_question(cls.answer) == cls.run  # the question follows REval's rule


def test_reference_answers_are_read_back():
    probes = [[4, "ans"], [6, "ans"], [7, "ans"], [2, "(a, b)"], [10, "y"]]
    (r,) = _run([_truth_opt(FUNC, probes, entry="f", input="(1.1, 2,)")])
    for task in (RevalCoverage(), RevalPath(), RevalState()):
        refs = [{**p, "line": n, "var": v, "code": FUNC} for p, (n, v) in zip(r.value["probes"], probes, strict=True)]
        items = [Item(str(k), [], ref) for k, ref in enumerate(refs)]
        texts = [task.reference_text(it) for it in items]
        assert all(t.startswith("[THOUGHT]\n") and t.endswith("\n[/ANSWER]") for t in texts)
        assert [v.status for v in task.judge(items, texts)] == ["pass"] * len(items), task.name


# --------------------------------------------------------------------------- reading answers
@pytest.mark.parametrize(
    ("text", "ans"),
    [
        (_ans("YES"), True),
        (_ans("no"), False),
        ("x [/THOUGHT] y [ANSWER] yes, it runs", True),
        ("[/THOUGHT]\nYES", None),  # no [ANSWER]: the whole text, whose first three letters are "[/T"
        (_ans("Maybe"), None),
        (_ans(""), None),
        ("[ANSWER]\nYES\n[/ANSWER]", None),  # chain of thought not closed
    ],
)
def test_read_coverage(text, ans):
    assert read_coverage(text) is ans


def test_read_path_and_the_lines_it_names():
    code = "def f(x):\n    if x:\n        return 1\n    return 1\n"
    assert read_path(_ans("return 1\nmore")) == "return 1"
    assert path_lines(read_path(_ans("return 1")), code) == [3, 4]
    assert path_lines(read_path(_ans("-1")), code) == [-1]
    assert path_lines(read_path(_ans("3\treturn 1")), code) == [-2]  # REval matches the code text only
    assert read_path(_ans("")) == -2 and read_path("[ANSWER]\nreturn 1") == -2


@pytest.mark.parametrize(
    ("body", "values", "ok"),
    [
        ("1; int", [_val(1)], True),
        ("1; float", [_val(1.0)], False),  # the value must be of the named type
        ("1.0000001; float", [_val(1.0)], True),  # floats within 1e-6
        ("1; <class 'int'>", [_val(1)], True),
        ("[1, 2]; List[int]", [_val([1, 2])], True),
        ("(1, 2); Tuple[int, int]", [_val((1, 2))], True),
        ("'a'; string", [_val("a")], True),
        ("a; str", [_val("a")], True),  # not a literal: the text itself
        ("\u2018a\u2019; str", [_val("a")], True),  # curly quotes are made straight
        ("None; NoneType", [_val(None)], True),
        ("Nil", None, True),
        ("nil; int", None, True),
        ("Nil", [_val(1)], False),
        ("1; int", None, False),
        ("2; int", [_val(1), _val(2)], True),  # a line run twice: either value
        ("['a']; collections.deque", [_val(["a"], "collections.deque", False)], True),
        ("['a']; list", [_val(["a"], "collections.deque", False)], False),
        ("bytearray(b'h'); bytearray", [_val(b"h", "bytearray", False)], True),
        ("b'h'; bytearray", [_val(b"h", "bytearray", False)], False),
        ("1900-01-01 11:00; datetime.datetime", [_val("1900-01-01T11:00:00", "datetime.datetime", False)], True),
        ("np.array([1, 2]); numpy.ndarray", [_val([1, 2], "numpy.ndarray", False)], True),
        ("[1.0, 2.0]; np.ndarray", [_val([1, 2], "numpy.ndarray", False)], False),  # locate() finds no np
        ("int; type", [_val("int", "type", False)], True),
        ("1; integer", [_val(1)], True),
        ("1", [_val(1)], False),  # no ";": ERROR
    ],
)
def test_read_state_and_revals_comparison(body, values, ok):
    ans = read_state(_ans(body))
    assert (ans is not None and state_matches(ans, values)) is ok


def test_state_text_writes_an_answer_revals_reader_accepts():
    for values in ([_val(1.5)], [_val({"a": (1, None)})], [_val(["x"], "collections.deque", False)], None):
        assert state_matches(read_state(_ans(state_text(values))), values)
    assert state_text([{"type": "dict", "exact": False, "plain": None, "repr": "{...}"}]) is None
    assert read_state(_ans("Nil")) == NIL


def test_output_question_replaces_the_expected_argument():
    shown = "a = A(2)\nassertEqual(a.f(), (2, 0))\nassertTrue(a.g())\nfor x in y:\n\tassertIn(x, z)\n"
    assert output_question(shown) == "a = A(2)\nassertEqual(a.f(), ??)\nassertTrue(??)\nfor x in y:\n    assertIn(x, z)"
    assert output_question("x = 1\n") is None and output_question("(((") is None


def test_answer_source_follows_revals_create_from_answer():
    q = "a = A()\nassertEqual(a.f(), ??)"
    src, _ = answer_source(_ans("a = A()\nassertEqual(a.f(), 1)"), q)
    assert src == "def dreval_output_pred(self):\n\ta = A()\n\tself.assertEqual(a.f(), 1)"
    src, _ = answer_source(_ans("assertEqual(a.f(), 1)"), q)  # shorter: padded with the question's lines
    assert src == "def dreval_output_pred(self):\n\ta = A()\n\tself.assertEqual(a.f(), 1)"
    doc = 's = """x\ny"""\nassertEqual(s, 1)'
    assert answer_source(_ans(doc), q)[0] == 'def dreval_output_pred(self):\n\ts = """x\ny"""\n\tself.assertEqual(s, 1)'
    for text, why in [
        (_ans("a = A()\nassertTrue(True)"), "penalized"),
        (_ans("a = A()\nprint(1)"), "penalized"),  # fewer asserts than asked
        (_ans("a = A(\nassertEqual(a.f(), 1)"), "not Python"),
        (_ans("s = '''assertEqual'''\nimport os"), "code outside"),  # the block toggle, out of step
        ("[ANSWER]\nassertEqual(a.f(), 1)", "no [/THOUGHT]"),
    ]:
        src, reason = answer_source(text, q)
        assert src is None and why in reason


HOSTILE = [
    "[" * 100_000,
    "9" * 100_000 + "; int",
    "{" + ", ".join(f"{i * (2**61 - 1)}: 0" for i in range(700)) + "}; dict",  # one hash value
    "1; " + "list[" * 3000,
    "__import__('os').system('touch /tmp/reval_pwned'); int",
    "bytearray(10**10); bytearray",
    "set([1] * 10**6); set",
    "np.array(" + "[" * 500 + "]" * 500 + "); numpy.ndarray",
    "x" * 200 + "[" * 5000 + "; " + "list[" * 5000,
    "\x00\udcff; str",
    "",
]


@pytest.mark.parametrize("body", HOSTILE)
def test_hostile_answers_are_judged_never_raise(body):
    code = "def f():\n    return 1\n"
    ref = {"covered": True, "next": [2], "values": [_val(1)], "line": 2, "var": "x", "code": code}
    for task in (RevalCoverage(), RevalPath(), RevalState()):
        (v,) = task.judge([Item("x", [], ref)], [_ans(body)])
        assert not v.passed
    answer_source(_ans(body), "assertEqual(f(), ??)")
    assert not Path("/tmp/reval_pwned").exists()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_the_readers_never_raise(body):
    values = [_val(1), _val("a"), _val([1.5]), _val(["a"], "collections.deque", False)]
    for text in (body, _ans(body), _ans(body + "; int"), _ans(body + "; float")):
        read_coverage(text)
        path_lines(read_path(text), "def f():\n    return 1\n")
        ans = read_state(text)
        if ans is not None:
            state_matches(ans, values)
            state_matches(ans, None)
        answer_source(text, "assertEqual(f(), ??)")


class _Echo:
    """An Engine answering each prompt with scripted texts (the item is found by its prompt)."""

    def __init__(self, answers: dict[str, list[str]]):
        self.answers = answers

    def apply_chat_template(self, messages):
        return messages[-1]["content"]

    def continue_prefixes(self, prefixes, n, *, stop, max_tokens, temperature=1.0, seed=None):
        assert stop == ["[/ANSWER]"]
        return [[Completion(t, 5, "stop") for t in self.answers[p][:n]] for p in prefixes]


def test_evaluate_task_with_a_scripted_engine():
    code = "def f(x):\n    return x\n"
    items = [
        Item(
            f"p{i}", [{"role": "user", "content": f"q{i}"}], {"covered": c, "next": [-1], "values": None, "code": code}
        )
        for i, c in enumerate((True, False, True))
    ]
    engine = _Echo({"q0": [_ans("YES"), _ans("NO")], "q1": ["truncated", _ans("YES")], "q2": [_ans("NO")] * 2})
    records, m = evaluate_task(engine, RevalCoverage(), items, GenConfig(n=2))
    assert m["pass1"] == pytest.approx((0.5 + 0.5 + 0) / 3) and m["group"] == "runtime"
    assert m["statuses"] == {"pass": 2, "fail": 4} and records[2]["passed"] == 1  # no answer reads NO


# --------------------------------------------------------------------------- on the mirror
@pytest.fixture(scope="module")
def truth(data_mirror: Path, tmp_path_factory):
    return ground_truth(data_mirror, tmp_path_factory.mktemp("reval-cache"))


@pytest.fixture(scope="module")
def loaded(truth, data_mirror: Path, tmp_path_factory):
    cache = tmp_path_factory.mktemp("reval-cache")
    tasks = {name: get_task(name) for name in ("reval-c", "reval-p", "reval-s", "reval-co")}
    return {name: (task, task.load(data_mirror, cache)) for name, task in tasks.items()}


NO_TRUTH = {  # programs that cannot run here: their 12 inputs
    **{f"117/{i}": "gensim" for i in range(4)},
    **{f"149/{i}": "gensim" for i in range(5)},
    **{f"122/{i}": "np.mat" for i in range(3)},
}


@pytest.mark.needs_shared
@pytest.mark.slow
class TestOnTheMirror:
    def test_counts_against_revals(self, loaded):
        """REval: 3,152 probes (C, P, S each); 336 ClassEval inputs (CO)."""
        for name in ("reval-c", "reval-p", "reval-s"):
            task, items = loaded[name]
            assert (len(items), len(task.excluded), len({it.id for it in items})) == (3052, 100, 3052)
        task, items = loaded["reval-co"]
        assert (len(items), len(task.excluded)) == (321, 15)
        no_question = {e["id"] for e in task.excluded if "no question" in e["reason"]}
        assert no_question == {"DREval/95/3", "DREval/98/3", "DREval/110/2", "DREval/149/1"}

    def test_stored_against_executed(self, truth):
        c = cross_check(truth)
        assert {k: why.split(": ")[1] for k, why in c["no_truth"].items()} == {
            k: "ModuleNotFoundError" if v == "gensim" else "AttributeError" for k, v in NO_TRUTH.items()
        }
        assert c["outputs"] == ["5/3"]  # stored "(3 + 5 + 7, 3 * 5 * 7)": no literal
        assert c["test_classes"] == [] and c["expr_probes"] == []
        assert c["questions"] == ["86/0", "126/0", "126/1", "126/2"]  # stored by Python <= 3.10: "(a, b) = ..."
        assert c["shown_content"] == ["86/4", "132/0", "139/5"]
        assert c["shown_whitespace"] == ["95/4", "98/3", "110/2", "114/3", "132/2", "132/3", "135/2"]

    @pytest.mark.parametrize(
        ("name", "known"),
        [
            ("reval-c", {}),
            ("reval-p", {}),
            # dict/list values holding datetime and numpy arrays: no answer REval's reader accepts
            ("reval-s", {"DREval/127/1/1": "no_answer", "DREval/127/3/2": "no_answer", "DREval/127/3/4": "no_answer"}),
            # the stored test input says `signin_system` where the test method has `self.signin_system`
            ("reval-co", {"DREval/139/5": "error"}),
        ],
    )
    def test_oracle_every_executed_truth_passes(self, loaded, name, known):
        task, items = loaded[name]
        t0 = time.perf_counter()
        res = oracle_check(task, items)
        print(f"{name}: oracle over {res['n']} items in {time.perf_counter() - t0:.1f} s")
        assert {f["id"]: f["status"] for f in res["failures"]} == known
        assert res["passed"] == len(items) - len(known)

    def test_wrong_answers_are_judged_wrong(self, loaded):
        task, items = loaded["reval-c"]
        it = items[0]
        assert not task.judge([it], [_ans("NO" if it.reference["covered"] else "YES")])[0].passed
        task, items = loaded["reval-p"]
        it = next(x for x in items if -1 not in x.reference["next"])
        assert not task.judge([it], [_ans("-1")])[0].passed
        task, items = loaded["reval-s"]
        it = next(x for x in items if x.reference["values"] and x.reference["values"][0]["type"] == "int")
        wrong = max(d["plain"] for d in it.reference["values"] if d["type"] == "int") + 1
        assert not task.judge([it], [_ans(f"{wrong}; int")])[0].passed
        task, items = loaded["reval-co"]
        it = next(x for x in items if x.id == "DREval/90/0")
        (v,) = task.judge([it], [_ans("a = AvgPartition([1, 2, 3, 4], 2)\nassertEqual(a.setNum(), (2, 1))")])
        assert (v.passed, v.status) == (False, "fail")

    def test_class_prompts_show_the_setup_and_the_test_code(self, loaded):
        _, items = loaded["reval-co"]
        text = next(x for x in items if x.id == "DREval/115/4").messages[1]["content"]
        assert f"{SETUP_HEAD}#         self.hotel = Hotel(" in text
        assert f"{PRELUDE}result = self.hotel.book_room(" in text and "assertEqual(result, ??)" in text
        _, items = loaded["reval-c"]
        text = next(x for x in items if x.id.startswith("DREval/115/4/")).messages[1]["content"]
        assert f"{SETUP_HEAD}        self.hotel = Hotel(" in text and f"When {CLASS_CALL} runs, does Line" in text
        assert RevalClassOutput().unavailable() is None
