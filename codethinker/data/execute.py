"""Execution filter (funnel step 3): run every (function, input) and keep what has a truth.

Each pair runs in the sandbox under the ground-truth tracer (:func:`codethinker.contra.tracer.trace_many`)
with a wall-clock timeout. A kept sample stores its expected output and its ConTra truth
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

from collections import Counter
from collections.abc import Callable
from typing import Any

__all__ = ["EXEC_REASONS", "classify", "exec_filter"]

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


def _trace_pairs(
    records: list[dict[str, Any]], tracer: Callable[[list[tuple[str, str, str]]], list[Any]]
) -> tuple[list[tuple[str, str, str]], list[tuple[dict[str, Any], int]], list[Any]]:
    """Every (function, input) pair as a tracer item, the (record, input index) of each, and the
    tracer's outcomes for them (one per item)."""
    items: list[tuple[str, str, str]] = []
    keys: list[tuple[dict[str, Any], int]] = []
    for rec in records:
        for i, args in enumerate(rec["inputs"]):
            items.append((rec["code"], args, rec["entry"]))
            keys.append((rec, i))
    outcomes = tracer(items)
    if len(outcomes) != len(items):
        raise RuntimeError(f"tracer returned {len(outcomes)} outcomes for {len(items)} items")
    return items, keys, outcomes


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


def exec_filter(
    records: list[dict[str, Any]],
    *,
    tracer: Callable[[list[tuple[str, str, str]]], list[Any]],
    render: Callable[[Any], str],
    max_trace_chars: int = 12000,
    keep_none: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Samples (one per kept pair, id ``<task_id>/<input index>``) and counts.

    ``tracer`` is ``trace_many`` with its sandbox settings bound; ``render`` turns a flow
    into its trace text (for the length cap).
    """
    items, keys, outcomes = _trace_pairs(records, tracer)
    drops: Counter[str] = Counter()
    etypes: Counter[str] = Counter()
    samples: list[dict[str, Any]] = []
    for (rec, i), out in zip(keys, outcomes, strict=True):
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
        samples.append(_sample(rec, i, flow, trace_chars))
    functions = len({s["task_id"] for s in samples})
    counts = {
        "functions_in": len(records),
        "pairs_in": len(items),
        "samples": len(samples),
        "functions": functions,
        "tests_per_function": round(len(samples) / functions, 2) if functions else 0.0,
        "dropped": {r: drops[r] for r in EXEC_REASONS if drops[r]},
        "error_types": dict(etypes.most_common(15)),
    }
    return samples, counts
