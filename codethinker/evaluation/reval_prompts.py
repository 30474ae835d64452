"""The chain-of-thought prompts of REval's four runtime tasks (C, P, S, CO), for
:mod:`codethinker.evaluation.reval_tasks`.

**The wording is this project's own.** It follows the structure and the answer format of REval's
``prompts/cot_<task>.txt`` (``r-eval/REval`` at 2f148b9): a system message; instructions; worked examples
(C: 2, P: 3, S: 3, CO: 2: functions, then a class run by test code), each ``[PYTHON]`` program and run
``[/PYTHON]``, ``[QUESTION]`` .. ``[/QUESTION]`` (not in CO), ``[THOUGHT]`` numbered steps ``[/THOUGHT]``,
``[ANSWER]`` answer ``[/ANSWER]``; then the item, ending in ``[THOUGHT]`` for the model to continue. The
model sees what REval shows it: the program, the call or the test code (with the test class's ``setUp``),
the probed line's number (C, S) and code (C, P, S), the probed variable (S). Answers take REval's format
(:data:`ANSWER_FORMAT`; read by :mod:`codethinker.evaluation.reval_answers`), so scores are comparable
with REval's in what is asked and how it is judged, but not prompt-identical to REval's. The worked
examples are this project's programs; ``tests/evaluation/test_reval_tasks.py`` runs each and checks its
answer.

**Presentation** (as REval's): HumanEval: the call is ``entry`` + the stored argument tuple less its
``,)``; P numbers the code lines ``n\\t`` (the answer is the code, not the number). ClassEval: the
``setUp`` body under :data:`SETUP_HEAD`, its lines commented (the first one only in P and CO), then the
test input; the call is :data:`CLASS_CALL`. CO shows the test input with the expected argument of each
top-level assert call replaced by ``??`` (REval's ``output_pred``, :func:`output_question`) after
:data:`PRELUDE`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

SYSTEM = "You are a careful Python expert who works out exactly what a piece of code does when it runs."
SETUP_HEAD = "\n# Run before the test code below (the test class's setUp):\n"
PRELUDE = "\n# The test code starts here. Answer with this test code alone, every ?? filled in.\n"
CLASS_CALL = "the test code above"
ASSERTS = ("assertEqual", "assertNotEqual", "assertAlmostEqual", "assertTrue", "assertFalse", "assertIsNone")
ASSERTS += ("assertIsNotNone", "assertIn", "assertNotIn")  # taskgen.ASSERTS: the calls CO asks about

_ASKS = {
    "coverage": "Below is a Python program, how it is run, and a question about that run: does a given line "
    "of the program execute?",
    "path": "Below is a Python program, how it is run, and a question about that run: which line of the "
    "program executes right after a given one?",
    "state": "Below is a Python program, how it is run, and a question about that run: what does a given "
    "variable hold right after a given line executes?",
    "output": "Below is a Python program and test code that runs it. Each ?? in the test code stands for a "
    "value the test expects.",
}
ANSWER_FORMAT = {  # the answer the readers of reval_answers parse
    "coverage": "Answer YES if it does and NO if it does not.",
    "path": "Answer with that next line, copied as it appears in the program, without a line number (lines of "
    "the test code never count). Answer -1 if the given line never executes or nothing in the program "
    "executes after it.",
    "state": "Answer in the form `value; type`, the value written as a Python literal and the type as a "
    "Python class name. If the line executes more than once, any one of its results counts, but give only "
    "one. Answer Nil if the line never executes.",
    "output": "Replace every ?? with the value the code really produces there, change nothing else, and "
    "answer with the completed test code.",
}
_HOW = (
    "Take the program exactly as written, run as shown, even if it looks wrong or unfinished. Think it "
    "through step by step between [THOUGHT] and [/THOUGHT], in at most 10 brief steps, describing what a loop "
    "does overall instead of going through every iteration. Then write only the answer between [ANSWER] and "
    "[/ANSWER], as the worked examples below do."
)
_RUN = "[PYTHON]\n{code}\n{invocation}\n[/PYTHON]\n"
QUERIES = {  # the item after the worked examples; the model continues after [THOUGHT]
    "coverage": _RUN + "[QUESTION]\nWhen {invocation_abbr} runs, does Line {line} of the program (`{codeline}`) "
    "execute?\n[/QUESTION]\n[THOUGHT]",
    "path": _RUN + "[QUESTION]\nSuppose the line `{codeline}` executes when {invocation_abbr} runs. Which line "
    "of the program (not of the test code) executes next? If the line never executes, or nothing in the program "
    "executes after it, answer -1.\n[/QUESTION]\n[THOUGHT]",
    "state": _RUN + "[QUESTION]\nWhen {invocation_abbr} runs, does Line {line} of the program (`{codeline}`) "
    "execute? If it does, what are the value and the type of {var} just after it? If not, answer Nil.\n"
    "[/QUESTION]\n[THOUGHT]",
    "output": _RUN + "[THOUGHT]",
}


@dataclass(frozen=True)
class Example:
    """A worked example: a program, its run (a function's argument tuple in REval's stored form, or test
    code when ``test``; CO: the test code with ``??``), the probe, the reasoning steps and the answer."""

    code: str
    entry: str
    run: str
    line: int = 0
    var: str = ""
    steps: tuple[str, ...] = ()
    answer: str = ""
    test: bool = False

    @property
    def thought(self) -> str:
        return "\n".join(f"{n}. {step}" for n, step in enumerate(self.steps, 1))


_CLIP = """def clip(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
"""
_STACK = """class Stack:
    def __init__(self):
        self.items = []

    def push(self, x):
        self.items.append(x)

    def pop(self):
        if not self.items:
            return None
        return self.items.pop()"""
_MAX = """def running_max(values):
    best = values[0]
    for v in values[1:]:
        if v > best:
            best = v
    return best
"""
_TEMPERATURE = """class Temperature:
    def __init__(self, celsius):
        self.celsius = celsius

    def fahrenheit(self):
        return self.celsius * 9 / 5 + 32

    def describe(self):
        f = self.fahrenheit()
        return str(f) + 'F'"""
_BILL = """def split_bill(amount, people):
    share = amount // people
    rest = amount - share * people
    return share, rest
"""
_RATIO = """def safe_ratio(a, b):
    if b == 0:
        ratio = None
    else:
        ratio = a / b
    return ratio
"""
_INVENTORY = """class Inventory:
    def __init__(self):
        self.stock = {}

    def add(self, name, qty):
        self.stock[name] = self.stock.get(name, 0) + qty
        return self.stock[name]"""
_INITIALS = """def initials(name):
    parts = name.split()
    return "".join(p[0].upper() for p in parts)"""
_ACCOUNT = """class BankAccount:
    def __init__(self, balance):
        self.balance = balance

    def withdraw(self, amount):
        if amount > self.balance:
            return False
        self.balance -= amount
        return True"""
_ACCOUNT_TEST = "acct = BankAccount(50)\nassertEqual(acct.withdraw(80), {})\nassertEqual(acct.withdraw(20), {})\n"
_ACCOUNT_TEST += "assertEqual(acct.balance, {})"
EXAMPLES = {  # C, P, S: functions (HumanEval's form), then a class run by test code (ClassEval's form)
    "coverage": (
        Example(
            _CLIP,
            "clip",
            "(12, 0, 10,)",
            5,
            answer="YES",
            steps=(
                "clip is called with x=12, lo=0 and hi=10.",
                "Line 2 checks 12 < 0, which is False, so Line 3 is skipped.",
                "Line 4 checks 12 > 10, which is True, so Line 5 executes and the function returns 10.",
                "Line 5 executes, so the answer is YES.",
            ),
        ),
        Example(
            _STACK,
            "Stack",
            "s = Stack()\ns.push(5)\nassertEqual(s.pop(), 5)\n",
            10,
            answer="NO",
            steps=(
                "The test code creates a Stack, whose items list starts empty, and push(5) makes it [5].",
                "pop is called. At Line 9, `not self.items` is False because the list holds 5.",
                "So Line 10 is skipped and Line 11 returns 5.",
                "Line 10 does not execute, so the answer is NO.",
            ),
            test=True,
        ),
    ),
    "path": (
        Example(
            _MAX,
            "running_max",
            "([4, 9, 2],)",
            5,
            answer="for v in values[1:]:",
            steps=(
                "running_max is called with values=[4, 9, 2], so best starts as 4.",
                "The loop first takes v=9. Since 9 > 4, `best = v` executes and best becomes 9.",
                "After the loop body, control goes back to the loop header for the next value.",
                "So the next line is `for v in values[1:]:`.",
            ),
        ),
        Example(
            _MAX,
            "running_max",
            "([7, 3, 1],)",
            5,
            answer="-1",
            steps=(
                "running_max is called with values=[7, 3, 1], so best starts as 7.",
                "The loop takes v=3, then v=1; neither is greater than 7.",
                "So `best = v` never executes, and the answer is -1.",
            ),
        ),
        Example(
            _TEMPERATURE,
            "Temperature",
            "t = Temperature(100)\nassertEqual(t.describe(), '212.0F')\n",
            9,
            answer="return self.celsius * 9 / 5 + 32",
            steps=(
                "The test code creates a Temperature with celsius=100 and calls describe.",
                "The first line of describe, `f = self.fahrenheit()`, calls the method fahrenheit.",
                "Execution enters fahrenheit, whose first line is `return self.celsius * 9 / 5 + 32`.",
                "So that line executes next.",
            ),
            test=True,
        ),
    ),
    "state": (
        Example(
            _BILL,
            "split_bill",
            "(17, 5,)",
            3,
            "rest",
            answer="2; int",
            steps=(
                "split_bill is called with amount=17 and people=5.",
                "Line 2 sets share = 17 // 5 = 3.",
                "Line 3 executes and sets rest = 17 - 3 * 5 = 2.",
                "rest is the integer 2, so the answer is 2; int.",
            ),
        ),
        Example(
            _RATIO,
            "safe_ratio",
            "(6, 4,)",
            3,
            "ratio",
            answer="Nil",
            steps=(
                "safe_ratio is called with a=6 and b=4.",
                "b == 0 is False, so the else branch (Line 5) executes instead of Line 3.",
                "Line 3 never executes, so the answer is Nil.",
            ),
        ),
        Example(
            _INVENTORY,
            "Inventory",
            "inv = Inventory()\nassertEqual(inv.add('pen', 3), 3)\n",
            6,
            "self.stock",
            answer="{'pen': 3}; dict",
            steps=(
                "The test code creates an Inventory; its stock starts as an empty dict.",
                "add is called with name='pen' and qty=3.",
                "Line 6 executes: 'pen' is not in stock yet, so get returns 0 and stock['pen'] becomes 0 + 3 = 3.",
                "self.stock is now {'pen': 3}, a dict, so the answer is {'pen': 3}; dict.",
            ),
            test=True,
        ),
    ),
    "output": (  # a function, then a class (REval-CO's items are all ClassEval's)
        Example(
            _INITIALS,
            "initials",
            'assert initials("ada king lovelace") == ??',
            answer='assert initials("ada king lovelace") == "AKL"',
            steps=(
                'initials is called with name="ada king lovelace".',
                'split() gives ["ada", "king", "lovelace"].',
                'The first letters, upper-cased and joined, give "AKL".',
                'So ?? is replaced with "AKL".',
            ),
        ),
        Example(
            _ACCOUNT,
            "BankAccount",
            _ACCOUNT_TEST.format("??", "??", "??"),
            answer=_ACCOUNT_TEST.format("False", "True", "30"),
            steps=(
                "The test code opens an account with balance 50.",
                "withdraw(80): 80 > 50, so it returns False and the balance stays 50.",
                "withdraw(20): 20 > 50 is False, so the balance becomes 30 and it returns True.",
                "acct.balance is then 30.",
                "So the three ?? are False, True and 30, in that order.",
            ),
            test=True,
        ),
    ),
}


def output_question(shown: str) -> str | None:
    """``taskgen.inspect_test``: the expected argument of every top-level assert call becomes ``??``."""
    try:
        tree = ast.parse(shown)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    calls = [s.value for s in tree.body if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)]
    calls = [c for c in calls if isinstance(c.func, ast.Name) and c.func.id in ASSERTS and c.args]
    for c in calls:
        c.args[1 if len(c.args) >= 2 else 0] = ast.Name(id="??")
    return ast.unparse(tree) if calls else None


def setup_text(source: str, comment_first: bool) -> str:
    """The test class's ``setUp`` body under :data:`SETUP_HEAD`, each line after the first commented (the
    first too for P and CO); nothing for unittest's own ``setUp``."""
    if not source:
        return ""
    head = SETUP_HEAD + ("# " if comment_first else "")
    text = head + "\n# ".join(source.split("\n")[1:])
    return "" if "Hook method for setting up the test fixture" in text else text


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


def _probe_query(kind: str, ex: Example, setup: str) -> str:
    """The C/P/S question on a program run (``ex``'s answer and thought are not used)."""
    lines = ex.code.split("\n")
    if ex.test:
        invocation, abbr, code = setup_text(setup, kind == "path") + "\n" + ex.run.rstrip(), CLASS_CALL, ex.code
    else:
        invocation = abbr = f"{ex.entry}{ex.run[:-2]})"
        code = "".join(f"{n}\t{x}\n" for n, x in enumerate(lines, 1)) if kind == "path" else ex.code
    fields = {"invocation": invocation, "invocation_abbr": abbr, "line": ex.line, "var": ex.var}
    return QUERIES[kind].format(code=code, codeline=lines[ex.line - 1], **fields)


def _output_query(code: str, setup: str, question: str) -> str:
    return QUERIES["output"].format(code=code, invocation=setup_text(setup, True) + PRELUDE + question)


def _worked(kind: str, ex: Example) -> str:
    query = _output_query(ex.code, "", ex.run) if kind == "output" else _probe_query(kind, ex, "")
    return f"{query}\n{ex.thought}\n[/THOUGHT]\n[ANSWER]\n{ex.answer}\n[/ANSWER]"


HEADS = {  # instructions and worked examples, before the item's query
    kind: f"{_ASKS[kind]} {ANSWER_FORMAT[kind]} {_HOW}\n\n" + "".join(_worked(kind, ex) + "\n\n" for ex in examples)
    for kind, examples in EXAMPLES.items()
}


def probe_prompt(kind: str, row: dict[str, Any], run: dict[str, Any], i: int, probe: dict[str, Any]) -> str:
    """The C/P/S prompt (``kind``: coverage, path, state) on ``probe`` of input ``i`` of a data row."""
    test = row["test"] is not None
    ex = Example(row["code"], row["entry_point"], row["inputs"][i], probe["lineno"], probe["var"], test=test)
    return HEADS[kind] + _probe_query(kind, ex, run.get("setup", ""))


def output_prompt(row: dict[str, Any], run: dict[str, Any], question: str) -> str:
    """The CO prompt on a ClassEval input whose test code with ``??`` is ``question``."""
    return HEADS["output"] + _output_query(row["code"], run["setup"], question)
