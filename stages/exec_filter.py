"""Stage exec_filter (funnel step 3): run each (function, input) in the sandbox under the tracer.

Run: ``python -m stages.exec_filter --leetcode data/gen_inputs/inputs.jsonl --synth data/synth/inputs.jsonl
--out data/exec_filter/samples.jsonl --metrics metrics/exec_filter.json`` (its cmd in dvc.yaml: ``dvc repro
exec_filter``). Reads ``params.yaml: exec_filter``, gen_inputs' LeetCode inputs and synth's short generated
programs; writes the kept samples (expected output + ConTra truth JSON each) and the metrics (drop reasons, see
:mod:`codethinker.data.execute`).
"""

from __future__ import annotations

import argparse
import functools
import itertools
from pathlib import Path

from codethinker.config import load_config
from codethinker.config.data import ExecFilterConfig
from codethinker.contra.render import render_trace
from codethinker.contra.tracer import trace_iter
from codethinker.data.execute import iter_samples
from codethinker.data.io import iter_jsonl, write_json, write_jsonl
from codethinker.ops.stage import path, stage_args, stage_main, stage_run
from codethinker.sandbox import SandboxConfig

ARGS = stage_args(
    "exec_filter",
    __doc__,
    leetcode=path("gen_inputs' LeetCode input records (JSONL)", rows=True),
    synth=path("synth's generated programs (JSONL)", rows=True),
    out=path("the kept samples with their truths (JSONL)"),
    metrics=path("counts and drop reasons: LeetCode's at the top, the generated programs' under synth (JSON)"),
)
FIELDS = {"task_id": str, "entry": str, "code": str, "inputs": list}


def _pairs(path: Path) -> int:
    """The (program, input) pairs of an input file: what the tracer runs."""
    return sum(len(rec["inputs"]) for rec in iter_jsonl(path, FIELDS))


def run(cfg: ExecFilterConfig, paths: argparse.Namespace) -> dict:
    """Both sources through the same filter, each sample written as its truth comes in (the stage's
    memory does not grow with its input); metrics: LeetCode's counts (the funnel's) at the top, the
    generated programs' under ``synth``."""
    config = SandboxConfig(timeout_s=float(cfg.timeout_s), memory_mb=cfg.memory_mb, workers=cfg.workers)
    counts: dict[str, dict] = {"leetcode": {}, "synth": {}}
    streams = [
        iter_samples(
            iter_jsonl(records, FIELDS),
            tracer=functools.partial(  # a bar per source, counted in (program, input) pairs: with an ETA
                trace_iter, sandbox_config=config, progress=f"exec_filter {source}", total=_pairs(records)
            ),
            render=render_trace,
            counts=counts[source],
            max_trace_chars=cfg.max_trace_chars,
            keep_none=cfg.keep_none,
        )
        for source, records in (("leetcode", paths.leetcode), ("synth", paths.synth))
    ]
    write_jsonl(paths.out, itertools.chain.from_iterable(streams))
    metrics = {**counts["leetcode"], "synth": counts["synth"]}  # the funnel's counts at the top
    write_json(paths.metrics, metrics)
    return metrics


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(ExecFilterConfig)
    with stage_run("exec_filter", cfg.as_dict()):
        metrics = run(cfg, paths)
    print(f"exec_filter: {metrics['pairs_in']} pairs -> {metrics['samples']} samples; {metrics['dropped']}")


if __name__ == "__main__":
    main()
