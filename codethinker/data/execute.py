"""Execution filter (funnel step 3): run every (function, input) and keep what has a truth.

Each pair runs in the sandbox under the ground-truth tracer (:func:`codethinker.contra.tracer.trace_iter`)
with a wall-clock timeout. :func:`iter_samples` hands the kept samples over one by one as the
tracer's outcomes come (the stage writes them as they come, so its memory does not grow with its
input); :func:`exec_filter` is its list. A kept sample stores its expected output and its ConTra truth
JSON, so training-time rewards never execute code. A dropped pair is counted under one reason:

=====================  ==========================================================
``timeout``            the call ran past the timeout
``memory``             the call hit the memory cap
``killed``             the worker died (crash, signal)
``runtime_error``      the call raised (``error_types`` counts the exception types)
``output_not_literal`` the return value has no literal form (objects, nan, inf, ...)
``input_not_literal``  the input is not literal arguments (cannot happen for gen_inputs)
``output_none``        the call returned ``None`` (in-place LeetCode methods: the
                       answer would be ``None`` whatever the input)
``untraceable``        the tracer could not build a flow (locals without literal form, ...)
``trace_too_long``     the rendered trace is longer than ``max_trace_chars``
=====================  ==========================================================
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["EXEC_REASONS", "classify", "exec_filter", "iter_samples"]

EXEC_REASONS = (
    "timeout",
    "memory",
    "killed",
    "runtime_error",
    "output_not_literal",
    "input_not_literal",
    "output_none",
    "untraceable",
    "trace_too_long",
)


def classify(reason: str) -> tuple[str, str | None]:
    """Map a tracer reason to ``(drop reason, exception type or None)``."""
    r = reason.strip()
    if r in ("timeout", "memory", "killed"):
        return r, None
    if r.startswith("error:"):
        etype = r.split(":", 2)[1].strip() or "Exception"
        return "runtime_error", etype
    if r.startswith("output has no literal form"):
        return "output_not_literal", None
    if r.startswith("bad program or input: input"):
        return "input_not_literal", None
    return "untraceable", None


def _sample(rec: dict[str, Any], i: int, flow: Any, trace_chars: int) -> dict[str, Any]:
    """The kept sample of ``rec``'s input ``i``: its expected output and its ConTra truth JSON."""
    return {
        "id": f"{rec['task_id']}/{i}",
        "task_id": rec["task_id"],
        "input_index": i,
        "difficulty": rec.get("difficulty"),
        "entry": rec["entry"],
        "code": rec["code"],
        "input": flow.input,
        "output": flow.output_text,
        "n_blocks": len(flow.blocks),
        "trace_chars": trace_chars,
        "truth": flow.to_json(),
    }


def iter_samples(
    records: Iterable[dict[str, Any]],
    *,
    tracer: Callable[[Iterable[tuple[str, str, str]]], Iterable[Any]],
    render: Callable[[Any], str],
    counts: dict[str, Any],
    max_trace_chars: int = 12000,
    keep_none: bool = False,
) -> Iterator[dict[str, Any]]:
    """The kept samples (one per kept pair, id ``<task_id>/<input index>``), each as soon as the
    tracer's outcome for it is in; ``counts`` gets the counts once the samples are exhausted.

    ``tracer`` takes ``(code, input, entry)`` items and gives one outcome per item, in order
    (``trace_iter`` with its sandbox settings bound, or ``trace_many``); ``records`` are read as the
    tracer takes their items. ``render`` turns a flow into its trace text (for the length cap).
    """
    keys: deque[tuple[dict[str, Any], int]] = deque()  # (record, input index) of the items in flight
    n_records = 0

    def items() -> Iterator[tuple[str, str, str]]:
        nonlocal n_records
        for rec in records:
            n_records += 1
            for i, args in enumerate(rec["inputs"]):
                keys.append((rec, i))
                yield (rec["code"], args, rec["entry"])

    pairs = items()
    drops: Counter[str] = Counter()
    etypes: Counter[str] = Counter()
    task_ids: set[str] = set()
    n_out = n_samples = 0
    for out in tracer(pairs):
        if not keys:
            raise RuntimeError(f"tracer returned more outcomes than items (outcome {n_out + 1})")
        rec, i = keys.popleft()
        n_out += 1
        if out.flow is None:
            reason, etype = classify(out.reason or "")
            drops[reason] += 1
            if etype:
                etypes[etype] += 1
            continue
        flow = out.flow
        if flow.output is None and not keep_none:
            drops["output_none"] += 1
            continue
        trace_chars = len(render(flow))
        if trace_chars > max_trace_chars:
            drops["trace_too_long"] += 1
            continue
        n_samples += 1
        task_ids.add(rec["task_id"])
        yield _sample(rec, i, flow, trace_chars)
    untaken = sum(1 for _ in pairs)  # items the tracer never asked for
    if keys or untaken:
        raise RuntimeError(f"tracer returned {n_out} outcomes for {n_out + len(keys) + untaken} items")
    functions = len(task_ids)
    counts.update(
        {
            "functions_in": n_records,
            "pairs_in": n_out,
            "samples": n_samples,
            "functions": functions,
            "tests_per_function": round(n_samples / functions, 2) if functions else 0.0,
            "dropped": {r: drops[r] for r in EXEC_REASONS if drops[r]},
            "error_types": dict(etypes.most_common(15)),
        }
    )


def exec_filter(
    records: Iterable[dict[str, Any]],
    *,
    tracer: Callable[[Iterable[tuple[str, str, str]]], Iterable[Any]],
    render: Callable[[Any], str],
    max_trace_chars: int = 12000,
    keep_none: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Samples and counts (the list of :func:`iter_samples`)."""
    counts: dict[str, Any] = {}
    samples = list(
        iter_samples(
            records, tracer=tracer, render=render, counts=counts, max_trace_chars=max_trace_chars, keep_none=keep_none
        )
    )
    return samples, counts
