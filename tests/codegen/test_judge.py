"""codegen.judge: per-test statuses in the sandbox, and hostile programs as candidate solutions: each
ends with a status and never a pass (as the reasoning task's hostile corpus does, tests/hostile/)."""

from __future__ import annotations

import pytest

from codethinker.codegen.judge import JudgeLimits, candidate_source, judge_programs
from codethinker.codegen.runner import CANDIDATE

LIMITS = JudgeLimits(test_timeout_s=1.0, setup_timeout_s=3.0, memory_mb=512, workers=2)


def method(body: str) -> str:
    """A Solution whose add method runs ``body`` (indented into the method)."""
    inner = "".join(f"        {line}\n" for line in body.splitlines())
    return f"class Solution:\n    def add(self, x):\n{inner}"


def test_per_test_statuses(add_problem):
    code = method("if x == 1:\n    return 2\nif x == -1:\n    raise KeyError('k')\nwhile True:\n    pass")
    [j] = judge_programs([add_problem], [code], LIMITS)
    assert j.status == "fail" and j.tests == ("pass", "error", "timeout") and j.passed == 1 and j.total == 3
    assert "KeyError" in j.detail and "over 1.00 s" in j.detail


def test_reference_passes_and_a_fresh_instance_per_test(add_problem):
    stateful = "class Solution:\n    n = 0\n" + method("self.n += 1\nassert self.n == 1\nreturn x + 1").removeprefix(
        "class Solution:\n"
    )
    js = judge_programs([add_problem] * 2, [add_problem.reference, stateful], LIMITS)
    assert [j.status for j in js] == ["pass", "pass"]


def test_a_judged_batch_shows_a_bar_counting_its_programs(add_problem, capfd):
    js = judge_programs([add_problem] * 3, [add_problem.reference, "", add_problem.reference], LIMITS, "judge x")
    assert [j.status for j in js] == ["pass", "no_program", "pass"]
    bar = capfd.readouterr().err
    assert "judge x" in bar and "2/2" in bar  # the programs that run; the empty one is judged without a job
    judge_programs([add_problem], [add_problem.reference], LIMITS)
    assert "judge" not in capfd.readouterr().err  # no label: no bar


def test_the_program_cannot_redefine_the_tests_helpers(add_problem):
    forge = "def plus(a, b):\n    return 100\n" + method("return 6 if x == 5 else 0")
    [j] = judge_programs([add_problem], [forge], LIMITS)
    assert j.status == "fail" and j.tests == ("fail", "pass", "pass")  # the input is the preamble's plus(2, 3)


def test_a_subclass_or_an_object_is_an_error_never_compared(add_problem):
    always = "class A:\n    def __eq__(self, o):\n        return True\n"
    sub = "class I(int):\n    def __eq__(self, o):\n        return True\n"
    codes = [always + method("return A()"), sub + method("return I(x + 1)"), method("return True if x == 1 else x + 1")]
    js = judge_programs([add_problem] * 3, codes, LIMITS)
    assert [j.tests for j in js[:2]] == [("error",) * 3] * 2 and "NotPlain" in js[0].detail
    assert js[2].tests == ("fail", "pass", "pass")  # True == 2 is False; bool stays bool, as the test's own ==


def test_the_expected_value_never_enters_the_sandbox(add_problem):
    """The job carries the inputs and the preamble only; the program sees no expected value anywhere."""
    from codethinker.codegen.judge import iter_judgements

    spy = method(
        "import gc\nfound = [o for o in gc.get_objects() if isinstance(o, str) and '== 2' in o]\n"
        "raise RuntimeError(repr(found[:3]))"
    )
    [j] = list(iter_judgements([add_problem], [spy], LIMITS))
    assert j.tests == ("error",) * 3 and "[]" in j.detail, j.detail


def test_the_source_ends_with_the_candidate_maker(add_problem):
    src = candidate_source(add_problem, "x = 1")
    assert src.startswith(add_problem.preamble) and src.rstrip().endswith(
        f"def {CANDIDATE}():\n    return Solution().add"
    )


HOSTILE = {
    "loop_at_import": ("while True:\n    pass\n", {"timeout", "killed"}),
    "loop_in_method": (method("while True:\n    pass"), {"fail"}),
    "swallow_timer": (
        method("while True:\n    try:\n        while True: pass\n    except BaseException:\n        pass"),
        None,
    ),
    "fork": ("import os\nos.fork()\n" + method("return x + 1"), {"error"}),
    "fork_in_method": (method("import os\nos.fork()\nreturn x + 1"), {"fail"}),
    "subprocess": (method("import subprocess\nreturn int(subprocess.check_output(['echo', str(x + 1)]))"), {"fail"}),
    "file_write": (method("open('/tmp/codegen_pwned', 'w').write('x')\nreturn x + 1"), {"fail"}),
    "write_outside": (method("open('/etc/passwd', 'a').write('x')\nreturn x + 1"), {"fail"}),
    "socket": (method("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=0.5)\nreturn x + 1"), {"fail"}),
    "huge_output": (method("print('x' * 10**7)\nreturn x"), {"fail"}),
    "huge_result": (method("return [0] * 10**8"), {"fail", "memory", "error", "killed"}),
    "memory_bomb": ("a = bytearray(10**10)\n" + method("return x + 1"), {"memory", "error"}),
    "recursion": (method("return self.add(x)"), {"fail"}),
    "deep_recursion": ("import sys\nsys.setrecursionlimit(10**7)\n" + method("return self.add(x + 1)"), None),
    "exit": ("raise SystemExit(0)\n", {"error"}),
    "exit_in_method": (method("import os\nos._exit(0)"), {"killed", "error"}),
    "syntax_error": ("class Solution:\n    def add(self, x)\n", {"error"}),
    "no_solution": ("def add(x):\n    return x + 1\n", {"fail"}),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_programs_end_with_a_status_and_never_pass(add_problem, name):
    code, allowed = HOSTILE[name]
    [j] = judge_programs([add_problem], [code], LIMITS)
    assert j.status != "pass" and j.passed < j.total, (name, j)
    statuses = {"fail", "timeout", "error", "memory", "killed"}
    assert j.status in (allowed or statuses), (name, j)


def test_hostile_programs_as_one_batch(add_problem):
    """One sandbox for all: a hostile program does not disturb the next one's verdict."""
    codes = [c for c, _ in HOSTILE.values()] + [add_problem.reference]
    js = judge_programs([add_problem] * len(codes), codes, LIMITS)
    assert all(j.status != "pass" for j in js[:-1]) and js[-1].status == "pass"
