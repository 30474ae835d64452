"""Generalization benchmarks (paper RQ4, Tables 4 and 12): tasks other than Python output prediction.

Each benchmark is a :class:`Task`: it loads its records (the local mirror, else the pinned public
URL, sha256-checked through :mod:`codethinker.data.sources`) as :class:`Item` s (a chat prompt and what
its judge needs), judges a batch of generations, and writes the reference answer of an item as a
model would (the oracle: a reference must be judged a pass; :func:`oracle_check` lists those that
are not, with the reason). Every generation goes through :func:`evaluate_task`: ``n`` samples per
item, pass@1 with the unbiased estimator (Chen et al. 2021) averaged over items, its 95% bootstrap
interval over items, and the count of every verdict status (a timeout or a crash of a generated
program is a status, never an exception).

Tasks register themselves in :data:`~codethinker.evaluation.task.TASKS` by name (``humaneval``, ``mbpp+``,
``gsm8k``...); :func:`get_task` imports the module that defines a name on first use. The judges import their
vocabulary (:class:`Item`, :class:`Verdict`, :func:`register`) from :mod:`codethinker.evaluation.task`, not from
here, so code that uses one judge (the code-generation reward) does not depend on every benchmark module this
registry names.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codethinker.evaluation.stats import pass_at_k
from codethinker.evaluation.task import CRUXEVAL_X_LANGUAGES, TASKS, Item, Task, Verdict, register

__all__ = [
    "ALIASES",
    "GROUPS",
    "NAMES",
    "SKIPPED",
    "TASKS",
    "GenConfig",
    "Item",
    "Task",
    "Verdict",
    "evaluate_task",
    "expand",
    "get_task",
    "known",
    "oracle_check",
    "pass_at_k",
    "register",
    "run_benchmarks",
    "runnable",
    "skipped",
    "summary_lines",
]


# name -> the module that registers it (imported on first use, so light tasks stay light)
_MODULES = {
    "cruxeval-i": "codethinker.evaluation.input_prediction",
    "humaneval": "codethinker.evaluation.codegen",
    "humaneval+": "codethinker.evaluation.codegen",
    "mbpp": "codethinker.evaluation.codegen",
    "mbpp+": "codethinker.evaluation.codegen",
    "gsm8k": "codethinker.evaluation.mathbench",
    "gsm-hard": "codethinker.evaluation.mathbench",
    "math500": "codethinker.evaluation.mathbench",
    "reval-co": "codethinker.evaluation.reval_tasks",
    "reval-c": "codethinker.evaluation.reval_tasks",
    "reval-p": "codethinker.evaluation.reval_tasks",
    "reval-s": "codethinker.evaluation.reval_tasks",
    **{f"cruxeval-x-{lang}": "codethinker.evaluation.multilingual" for lang in CRUXEVAL_X_LANGUAGES},
}
SKIPPED = {  # benchmarks that cannot run here, with the reason
    "lcb-cg": "LiveCodeBench-CG lives only on the Hugging Face hub (livecodebench/code_generation_lite) and its "
    "judge (stdin/stdout and functional tests) is not built yet: skipped",
}
NAMES = (*(n for n in _MODULES if not n.startswith("cruxeval-x-")), "cruxeval-x", *SKIPPED)
GROUPS = {
    "input": ("cruxeval-i",),
    "runtime": ("reval-co", "reval-c", "reval-p", "reval-s"),
    "multilingual": tuple(f"cruxeval-x-{lang}" for lang in CRUXEVAL_X_LANGUAGES),
    "codegen": ("humaneval", "humaneval+", "mbpp", "mbpp+"),
    "math": ("gsm8k", "gsm-hard", "math500"),
}


def get_task(name: str) -> Task:
    """The task called ``name`` (case-insensitive); a ValueError lists the known names."""
    key = name.strip().lower()
    if key not in TASKS and key in _MODULES:
        importlib.import_module(_MODULES[key])
    if key not in TASKS:
        raise ValueError(f"unknown generalization benchmark {name!r}; known: {', '.join(sorted(_MODULES))}")
    return TASKS[key]()


@dataclass(frozen=True)
class GenConfig:
    """Sampling settings of one generalization evaluation."""

    n: int = field(default=5, metadata={"help": "samples per problem (pass@1 is the unbiased estimate over them)"})
    temperature: float = field(default=0.2, metadata={"help": "sampling temperature (0: greedy; then n=1 suffices)"})
    max_tokens: int = field(default=2048, metadata={"help": "generation limit per answer"})
    seed: int = field(default=0, metadata={"help": "sampling seed"})
    limit: int | None = field(default=None, metadata={"help": "first N problems of each benchmark (None: all)"})

    def __post_init__(self) -> None:
        if self.n < 1 or self.max_tokens < 1 or self.temperature < 0:
            raise ValueError("need n >= 1, max_tokens >= 1, temperature >= 0")
        if self.limit is not None and self.limit < 1:
            raise ValueError("limit must be >= 1 or null")


def status_counts(statuses: Iterable[str]) -> dict[str, int]:
    """How many answers ended in each status, as a metrics mapping: the ``error`` status is counted under
    ``errored``, because DVC cannot load a metrics file with a key named ``error`` ("DVC failed to load
    some metrics").

    >>> status_counts(["pass", "error", "error"])
    {'pass': 1, 'errored': 2}
    """
    return {("errored" if s == "error" else s): n for s, n in Counter(statuses).items()}


def evaluate_task(
    engine: Any, task: Task, items: Sequence[Item], config: GenConfig
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Generate ``config.n`` answers per item with ``engine``, judge them; one record per answer and
    the metrics dict (pass@1 mean and 95% interval over items, statuses, tokens, seconds)."""
    from codethinker.evaluation.stats import bootstrap_ci

    items = list(items[: config.limit] if config.limit else items)
    prompts = [engine.apply_chat_template(it.messages) for it in items]
    t0 = time.perf_counter()
    outs = engine.continue_prefixes(
        prompts,
        config.n,
        stop=list(task.stop),
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        seed=config.seed,
    )
    gen_s = time.perf_counter() - t0
    flat = [(it, c) for it, comps in zip(items, outs, strict=True) for c in comps]
    t1 = time.perf_counter()
    verdicts = task.judge([it for it, _ in flat], [c.text for _, c in flat])
    judge_s = time.perf_counter() - t1
    records = [
        {
            "id": it.id,
            "sample": k % config.n,
            "passed": int(v.passed),
            "status": v.status,
            "detail": v.detail[:300],
            "tokens": c.n_tokens,
            "finish": c.finish_reason,
            "text": c.text,
        }
        for k, ((it, c), v) in enumerate(zip(flat, verdicts, strict=True))
    ]
    per_item: dict[str, list[int]] = {}
    for r in records:
        per_item.setdefault(r["id"], []).append(r["passed"])
    scores = [pass_at_k(len(v), sum(v), 1) for v in per_item.values()]
    ci = bootstrap_ci(scores, seed=config.seed)
    tokens = [r["tokens"] for r in records]
    metrics = {
        "benchmark": task.name,
        "display": task.display,
        "group": task.group,
        "config": asdict(config),
        "n_problems": len(items),
        "n_answers": len(records),
        **ci.as_dict("pass1"),
        "statuses": status_counts(r["status"] for r in records),
        "tokens_mean": sum(tokens) / len(tokens) if tokens else None,
        "truncated_rate": sum(r["finish"] == "length" for r in records) / len(records) if records else None,
        "gen_seconds": round(gen_s, 2),
        "judge_seconds": round(judge_s, 2),
    }
    return records, metrics


def oracle_check(task: Task, items: Sequence[Item]) -> dict[str, Any]:
    """Judge every item's reference answer: ``{"n", "passed", "failures": [{"id", "status", "detail"}]}``."""
    verdicts = task.judge(list(items), [task.reference_text(it) for it in items])
    failures = [
        {"id": it.id, "status": v.status, "detail": v.detail[:300]}
        for it, v in zip(items, verdicts, strict=True)
        if not v.passed
    ]
    return {"benchmark": task.name, "n": len(items), "passed": len(items) - len(failures), "failures": failures}


def skipped(task_name: str, why: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The metrics dict of a benchmark that cannot run here (offline LCB-CG), with the reason."""
    return {"benchmark": task_name, "skipped": why, **dict(extra or {})}


ALIASES = {"cruxeval-x": tuple(f"cruxeval-x-{lang}" for lang in CRUXEVAL_X_LANGUAGES)}  # one name, many tasks


def expand(names: Sequence[str]) -> list[str]:
    """``names`` lower-cased, each alias (``cruxeval-x``: its 19 languages) replaced by its tasks, in order."""
    out: list[str] = []
    for name in names:
        key = name.strip().lower()
        out.extend(ALIASES.get(key, (key,)))
    return list(dict.fromkeys(out))


def known(name: str) -> bool:
    """Whether ``name`` is a generalization benchmark (one that runs, one skipped with its reason, or an alias)."""
    key = name.strip().lower()
    return key in _MODULES or key in TASKS or key in SKIPPED or key in ALIASES


def summary_lines(results: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The stage's log of a finished run: pass@1 (%) of each benchmark that ran, one line per group, then
    the skipped ones, one line per reason (statuses and intervals are in the metrics files).

    >>> summary_lines({"gsm8k": {"display": "GSM8K", "group": "math", "pass1": 0.25, "n_problems": 20},
    ...                "go": {"benchmark": "cruxeval-x-go", "skipped": "runtime missing: go"}})
    ['pass@1 % (problems): math GSM8K 25.0 (20)', 'skipped (runtime missing): cruxeval-x-go']
    """
    lines, by_group, by_reason = [], {}, {}
    for m in results.values():
        if "skipped" in m:
            reason, _, detail = str(m["skipped"]).partition(": ")
            by_reason.setdefault(reason if detail else str(m["skipped"]), []).append(m["benchmark"])
        else:
            by_group.setdefault(m.get("group", "other"), []).append(
                f"{m['display']} {100 * m['pass1']:.1f} ({m['n_problems']})"
            )
    cells = [f"{group} " + " · ".join(cs) for group, cs in by_group.items()]
    if cells:
        lines.append("pass@1 % (problems): " + cells[0])
        lines += [" " * len("pass@1 % (problems): ") + c for c in cells[1:]]
    lines += [f"skipped ({reason}): " + ", ".join(names) for reason, names in by_reason.items()]
    return lines


def runnable(names: Sequence[str]) -> Iterator[tuple[str, Task | None, str | None]]:
    """Each benchmark of ``names`` (aliases expanded) as ``(name, task, why)``: ``why`` is None when it
    can run here, else the reason it is skipped (:data:`SKIPPED`, which has no task, or the task's
    :meth:`Task.unavailable`)."""
    for key in expand(names):
        if key in SKIPPED:
            yield key, None, SKIPPED[key]
            continue
        task = get_task(key)
        yield key, task, task.unavailable()


def run_benchmarks(
    engine: Any,
    names: Sequence[str],
    config: GenConfig,
    *,
    mirror: Path | None,
    cache_dir: Path,
    pred_dir: Path | None = None,
    metrics_dir: Path | None = None,
    extra: Mapping[str, Any] | None = None,
    desc: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Evaluate ``engine`` on each named benchmark; write ``<pred_dir>/<name>.jsonl`` (every answer,
    judged) and ``<metrics_dir>/<name>.json``; a benchmark in :data:`SKIPPED` is written as skipped.
    ``desc``: a progress bar over the benchmarks with this label (None: no bar); the results in a few
    lines: :func:`summary_lines`."""
    from tqdm.auto import tqdm

    from codethinker.data.io import write_json, write_jsonl

    results: dict[str, dict[str, Any]] = {}
    todo = list(runnable(names))
    bar = tqdm(todo, desc=desc, unit="bench", file=sys.stderr, dynamic_ncols=True, disable=desc is None)
    for key, task, why in bar:
        bar.set_postfix_str(key)
        t0 = time.perf_counter()
        if why is not None:
            m = skipped(key, why, {"display": task.display, "group": task.group} if task else None)
        else:
            assert task is not None
            items = task.load(mirror, cache_dir)
            records, m = evaluate_task(engine, task, items, config)
            m.update(dict(extra or {}), total=len(items), wall_seconds=round(time.perf_counter() - t0, 2))
            if excluded := getattr(task, "excluded", None):  # items left out before prompting, with reasons
                m.update(excluded=len(excluded), excluded_examples=list(excluded)[:20])
            if pred_dir is not None:
                write_jsonl(Path(pred_dir) / f"{key}.jsonl", records)
        if metrics_dir is not None:
            write_json(Path(metrics_dir) / f"{key}.json", m)
        results[key] = m
    return results
