"""REval's runtime-behaviour tasks (paper Appendix I.2, Table 4 "runtime"): REval-CO, -C, -P, -S.

REval (Chen et al., ICSE 2025; ``r-eval/REval`` at 2f148b9, read: ``evaluation.py``, ``dynamics.py``,
``dataset.py``, ``taskgen.py``, ``inference.py``, ``prompts/``) asks four questions about programs
``DREval/0..84`` (HumanEval functions, one call each) and ``DREval/85..153`` (ClassEval classes, one
unittest method each). ``DREval_tasks.jsonl`` holds the probes ``(lineno, var)`` of up to 5 inputs a
program; each probe is one item of C, P and S (REval: 3,152 problems).

==========  ====================================================  ============================  ==========
task        question                                              answer in ``[ANSWER]``        judged
==========  ====================================================  ============================  ==========
reval-c     does Line L (code) execute when <call> runs?          YES / NO (first 3 letters)    = coverage
reval-p     the next line executed inside the program after L     one code line, or -1          any match
reval-s     value and type of ``var`` after Line L, or Nil        ``value; type`` or ``Nil``    any match
reval-co    fill in the ``??`` of the test code's ``assertX``     the completed test code       it runs
==========  ====================================================  ============================  ==========

This module loads the data, orchestrates the ground truth and holds the four registered tasks; the rest
is split off: :mod:`~codethinker.evaluation.reval_prompts` (the chain-of-thought prompts: this project's
own wording in REval's structure and answer format, so scores compare with REval's in task definition but
the prompts are not REval's text), :mod:`~codethinker.evaluation.reval_runner` (the sandbox-side runner
``"reval"``: the executed truth as REval's ``dynamics`` records it, and REval-CO's answer run) and
:mod:`~codethinker.evaluation.reval_answers` (REval's answer readers and scoring). Their public names
are importable from here too.

**Items.** C/P/S: ``<task id>/<input>/<k>`` per probe, the reference the executed record of the probe
(``covered``, ``next``, ``values``). CO: ``<task id>/<input>`` per ClassEval input with REval's stored
``output_pred`` question (the 38 inputs past REval's 5 per program get it from the same rule,
:func:`output_question`; 4 inputs without a top-level assert call have no question and are left out).
:func:`ground_truth` runs each probed HumanEval input and each ClassEval input once in the sandbox
(cached in the process: the four tasks share it). The reference texts (``reference_text``, the oracle)
are answers in the prompts' format, read back by the same readers as a model's.

**Not like REval.** Python 3.11 here; REval's data were made with <= 3.10 (5 stored questions unparse
tuple targets with parentheses). Checked once: the executed C, P and S truth of 2,988 probes is the same
under Python 3.10.13 and 3.11.7 (programs needing numpy left out). Items whose program cannot run here are
left out (``Task.excluded``, with the reason): HtmlUtil and VectorUtil need gensim/bs4, KappaCalculator
numpy's removed ``np.mat``. REval-CO's judge accepts any answer that runs (``assertEqual(1, 1)`` once per
asked assert passes), as REval's does. :func:`cross_check` compares what ran with what the data store.
"""

from __future__ import annotations

import ast
import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codethinker.contra.render import ANSWER_CLOSE, ANSWER_OPEN, THOUGHT_CLOSE, THOUGHT_OPEN
from codethinker.evaluation.reval_answers import (
    NIL,
    answer_source,
    path_lines,
    read_coverage,
    read_path,
    read_state,
    state_matches,
    state_text,
)
from codethinker.evaluation.reval_prompts import chat, output_prompt, output_question, probe_prompt
from codethinker.evaluation.reval_runner import STUB, reval_runner, safe_repr
from codethinker.evaluation.task import Item, Verdict, register

__all__ = [
    "NIL",
    "STUB",
    "RevalClassOutput",
    "RevalCoverage",
    "RevalPath",
    "RevalState",
    "Truth",
    "answer_source",
    "cross_check",
    "ground_truth",
    "output_question",
    "path_lines",
    "read_coverage",
    "read_path",
    "read_state",
    "reval_runner",
    "state_matches",
    "state_text",
    "tasks_path",
]

TRUTH_TIMEOUT_S, ANSWER_TIMEOUT_S = 30.0, 10.0


# --------------------------------------------------------------------------- data and executed truth
# --------------------------------------------------------------------------- data and executed truth
def tasks_path(mirror: Path | None, cache_dir: Path) -> Path:
    """``DREval_tasks.jsonl``: the ``reval-tasks`` source where sources.py has it, else the mirror's copy."""
    from codethinker.data.sources import SOURCES, resolve

    if "reval-tasks" in SOURCES:
        return resolve(SOURCES["reval-tasks"], mirror, cache_dir)[0]
    if mirror is None or not (mirror / "reval/DREval_tasks.jsonl").is_file():
        raise FileNotFoundError(f"reval/DREval_tasks.jsonl is not in the mirror {mirror}")
    return mirror / "reval/DREval_tasks.jsonl"


@dataclass(frozen=True)
class Truth:
    """The data rows, the task rows, and per ``(row, input)`` the executed record or why there is none."""

    rows: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    runs: dict[tuple[int, int], Any]
    seconds: float


def _truth_jobs(rows: list[dict[str, Any]], tasks: list[dict[str, Any]]) -> dict[tuple[int, int], Any]:
    """One job per probed HumanEval input and per ClassEval input (CO asks every test class)."""
    from codethinker.sandbox import Job

    jobs = {}
    for t in tasks:
        row, pairs = rows[t["idx"]], {p["input_idx"]: p for p in t["tasks"]}
        for i in range(len(row["inputs"])) if row["test"] is not None else sorted(pairs):
            probes = [[q["lineno"], q["var"]] for q in pairs[i]["task"]] if i in pairs else []
            opt = {"mode": "truth", "code": row["code"], "entry": row["entry_point"], "test": row["test"]}
            opt.update(test_index=i, input=row["inputs"][i], probes=probes)
            jobs[t["idx"], i] = Job(STUB, entry="codethinker_reval_", runner="reval", options=opt)
    return jobs


def _record(res: Any, n_probes: int) -> Any:
    """The runner's record, or why there is none (a failed run, a malformed record)."""
    if res.status != "ok":
        return f"{res.status}: {res.error_type}: {res.error_message}"[:300]
    v = res.value
    if type(v) is not dict or type(v.get("probes")) is not list or len(v["probes"]) != n_probes:
        return "malformed runner record"
    return v


@functools.lru_cache(maxsize=2)
def _execute(data: str, tasks: str, timeout_s: float, workers: int | None) -> Truth:
    from codethinker.data.io import read_jsonl
    from codethinker.sandbox import Sandbox, SandboxConfig

    rows = read_jsonl(data, {"task_id": str, "entry_point": str, "code": str, "inputs": list, "outputs": list})
    task_rows = read_jsonl(tasks, {"task_id": str, "idx": int, "tasks": list})
    jobs, t0 = _truth_jobs(rows, task_rows), time.perf_counter()
    with Sandbox(SandboxConfig(timeout_s=timeout_s, workers=workers)) as sb:
        results = sb.map(list(jobs.values()))
    runs = {k: _record(r, len(j.options["probes"])) for (k, j), r in zip(jobs.items(), results, strict=True)}
    return Truth(rows, task_rows, runs, time.perf_counter() - t0)


def ground_truth(
    mirror: Path | None, cache_dir: Path, *, timeout_s: float = TRUTH_TIMEOUT_S, workers: int | None = None
) -> Truth:
    """Execute each probed HumanEval input and each ClassEval input once (cached in the process: the four
    tasks share it)."""
    from codethinker.data.sources import SOURCES, resolve

    data = resolve(SOURCES["reval"], mirror, cache_dir)[0]
    return _execute(str(data), str(tasks_path(mirror, cache_dir)), timeout_s, workers)


def _lines(text: str) -> list[str]:
    return [x.strip() for x in text.splitlines() if x.strip()]


def _stored_output(row: dict[str, Any], i: int, run: dict[str, Any]) -> bool:
    from codethinker.contra.values import parse_literal

    try:
        return bool(run["output"]["exact"] and parse_literal(row["outputs"][i]) == run["output"]["plain"])
    except (ValueError, IndexError, KeyError, TypeError):
        return False


def cross_check(truth: Truth) -> dict[str, Any]:
    """What ran against what the data store: HumanEval outputs (``outputs``); per ClassEval input the
    number of test classes, the shown input against its test method's body (only white space differs,
    or more), the stored question against :func:`output_question`; probes at expression statements
    (taskgen saw their line run) found not run or Nil here. Lists of ``row/input`` ids."""
    out: dict[str, Any] = {"no_truth": {f"{k[0]}/{k[1]}": v for k, v in truth.runs.items() if isinstance(v, str)}}
    out.update(outputs=[], test_classes=[], shown_whitespace=[], shown_content=[], questions=[], expr_probes=[])
    pairs_of = {t["idx"]: {p["input_idx"]: p for p in t["tasks"]} for t in truth.tasks}
    for (idx, i), run in truth.runs.items():
        if isinstance(run, str):
            continue
        key, row, pairs = f"{idx}/{i}", truth.rows[idx], pairs_of[idx]
        if row["test"] is None:
            if not _stored_output(row, i, run):
                out["outputs"].append(key)
        else:
            stored = row["inputs"][i]
            if run["n_classes"] != len(row["inputs"]):
                out["test_classes"].append(key)
            if run["shown"].rstrip() != stored.rstrip():
                out["shown_content" if _lines(run["shown"]) != _lines(stored) else "shown_whitespace"].append(key)
            if i in pairs and output_question(stored) != pairs[i]["output_pred"]:
                out["questions"].append(key)
        exprs = {s.lineno for s in ast.walk(ast.parse(row["code"])) if isinstance(s, ast.Expr)}
        for q, p in zip(pairs[i]["task"] if i in pairs else [], run["probes"], strict=True):
            if q["lineno"] in exprs and (not p["covered"] or p["values"] is None):
                out["expr_probes"].append(f"{key}:{q['lineno']}:{q['var']}")
    return out


# --------------------------------------------------------------------------- items
def _probe_items(truth: Truth, kind: str) -> tuple[list[Item], list[dict[str, str]]]:
    """One item per probe ``<task id>/<input>/<k>``; probes of inputs that did not run are excluded."""
    items, excluded = [], []
    for t in truth.tasks:
        row = truth.rows[t["idx"]]
        for p in t["tasks"]:
            run = truth.runs[t["idx"], p["input_idx"]]
            for k, q in enumerate(p["task"]):
                iid = f"{t['task_id']}/{p['input_idx']}/{k}"
                if isinstance(run, str):
                    excluded.append({"id": iid, "reason": run})
                    continue
                ref = {**run["probes"][k], "line": q["lineno"], "var": q["var"], "code": row["code"]}
                items.append(Item(iid, chat(probe_prompt(kind, row, run, p["input_idx"], q)), ref))
    return items, excluded


def _output_items(truth: Truth) -> tuple[list[Item], list[dict[str, str]]]:
    """One item per ClassEval input ``<task id>/<input>`` that has an output question and ran here."""
    items, excluded = [], []
    for t in truth.tasks:
        row, pairs = truth.rows[t["idx"]], {p["input_idx"]: p["output_pred"] for p in t["tasks"]}
        for i, shown in enumerate(row["inputs"] if row["test"] is not None else ()):
            iid, run = f"{t['task_id']}/{i}", truth.runs[t["idx"], i]
            question = pairs[i] if i in pairs else output_question(shown)
            if question is None or isinstance(run, str):
                excluded.append({"id": iid, "reason": run if question else "no top-level assert call: no question"})
                continue
            ref = {"code": row["code"], "test": row["test"], "entry": row["entry_point"], "test_index": i}
            ref.update(question=question, answer=ast.unparse(ast.parse(shown)))
            items.append(Item(iid, chat(output_prompt(row, run, question)), ref))
    return items, excluded


# --------------------------------------------------------------------------- the tasks
class _RevalTask:
    name = display = kind = ""
    group, stop = "runtime", (ANSWER_CLOSE,)

    def __init__(self, timeout_s: float = ANSWER_TIMEOUT_S, workers: int | None = None) -> None:
        self.timeout_s, self.workers = timeout_s, workers
        self.excluded: list[dict[str, str]] = []  # items whose truth could not be executed here, with why

    def unavailable(self) -> str | None:
        return None  # Python only; programs that need what is missing here are excluded item by item

    def load(self, mirror: Path | None, cache_dir: Path) -> list[Item]:
        truth = ground_truth(mirror, cache_dir, workers=self.workers)
        items, self.excluded = _output_items(truth) if self.kind == "output" else _probe_items(truth, self.kind)
        return items

    def reference_text(self, item: Item) -> str:
        answer = f"{ANSWER_OPEN}\n{self._reference(item.reference)}\n{ANSWER_CLOSE}"
        return f"{THOUGHT_OPEN}\nthe executed trace\n{THOUGHT_CLOSE}\n{answer}"

    def _reference(self, ref: dict[str, Any]) -> str:
        raise NotImplementedError

    def judge(self, items: Sequence[Item], texts: Sequence[str]) -> list[Verdict]:
        return [self._verdict(it.reference, t) for it, t in zip(items, texts, strict=True)]

    def _verdict(self, ref: dict[str, Any], text: str) -> Verdict:
        raise NotImplementedError


@register("reval-c")
class RevalCoverage(_RevalTask):
    name, display, kind = "reval-c", "REval-C", "coverage"

    def _reference(self, ref: dict[str, Any]) -> str:
        return "YES" if ref["covered"] else "NO"

    def _verdict(self, ref: dict[str, Any], text: str) -> Verdict:
        ans = read_coverage(text)
        ok = bool(ans) == ref["covered"]
        status = "pass" if ok else "fail" if ans is not None else "no_answer"
        return Verdict(ok, status, f"answer {ans} (None reads NO), executed {ref['covered']}")


@register("reval-p")
class RevalPath(_RevalTask):
    name, display, kind = "reval-p", "REval-P", "path"

    def _reference(self, ref: dict[str, Any]) -> str:
        n = next((n for n in ref["next"] if n != -1), -1)
        return "-1" if n == -1 else ref["code"].split("\n")[n - 1].strip()

    def _verdict(self, ref: dict[str, Any], text: str) -> Verdict:
        lines = path_lines(read_path(text), ref["code"])
        ok = any(n in ref["next"] for n in lines)
        status = "pass" if ok else "no_answer" if lines == [-2] else "fail"
        return Verdict(ok, status, f"answer names lines {lines[:10]}, executed next {ref['next']}")


@register("reval-s")
class RevalState(_RevalTask):
    name, display, kind = "reval-s", "REval-S", "state"

    def _reference(self, ref: dict[str, Any]) -> str:
        text = state_text(ref["values"])
        return text if text is not None else "(no answer REval accepts)"

    def _verdict(self, ref: dict[str, Any], text: str) -> Verdict:
        ans = read_state(text)
        ok = ans is not None and state_matches(ans, ref["values"])
        shown = "Nil" if ref["values"] is None else "; ".join(f"{d['repr']} ({d['type']})" for d in ref["values"][:3])
        status = "pass" if ok else "no_answer" if ans is None else "fail"
        return Verdict(ok, status, f"answer {safe_repr(ans)[:80]}, executed {shown}")


@register("reval-co")
class RevalClassOutput(_RevalTask):
    name, display, kind = "reval-co", "REval-CO", "output"

    def _reference(self, ref: dict[str, Any]) -> str:
        return ref["answer"]

    def judge(self, items: Sequence[Item], texts: Sequence[str]) -> list[Verdict]:
        from codethinker.sandbox import Job, Sandbox, SandboxConfig

        built = [answer_source(t, it.reference["question"]) for it, t in zip(items, texts, strict=True)]
        jobs = {}
        for i, (it, (src, _)) in enumerate(zip(items, built, strict=True)):
            if src is not None:
                opt = {k: it.reference[k] for k in ("code", "test", "entry", "test_index")}
                jobs[i] = Job(
                    STUB, entry="codethinker_reval_", runner="reval", options={**opt, "mode": "answer", "answer": src}
                )
        results: dict[int, Any] = {}
        if jobs:
            with Sandbox(SandboxConfig(timeout_s=self.timeout_s, workers=self.workers)) as sb:
                results = dict(zip(jobs, sb.map(list(jobs.values())), strict=True))
        out = []
        for i, (_, why) in enumerate(built):
            r = results.get(i)
            if r is None:
                out.append(Verdict(False, "no_answer", why))
            elif r.status == "ok":
                out.append(Verdict(r.value is True, "pass" if r.value is True else "fail"))
            else:
                status = "fail" if r.error_type == "AssertionError" else r.status
                out.append(Verdict(False, status, f"{r.error_type}: {r.error_message}"[:300]))
        return out
