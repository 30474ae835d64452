"""Stage exec_filter (funnel step 3): run each (function, input) in the sandbox under the tracer.

Run: ``python -m stages.exec_filter`` (or ``dvc repro exec_filter``). Reads ``params.yaml:
exec_filter``, ``data/gen_inputs/inputs.jsonl`` (LeetCode) and ``data/synth/inputs.jsonl`` (short
generated programs); writes ``data/exec_filter/samples.jsonl``
(expected output + ConTra truth JSON per kept sample) and ``metrics/exec_filter.json`` (drop
reasons, see :mod:`codethinker.data.execute`).
"""

from __future__ import annotations

import functools
from pathlib import Path

from codethinker.config import load_config
from codethinker.config.data import ExecFilterConfig
from codethinker.contra.render import render_trace
from codethinker.contra.tracer import trace_many
from codethinker.data.execute import exec_filter
from codethinker.data.io import read_jsonl, write_json, write_jsonl
from codethinker.ops.stage import stage_main, stage_run
from codethinker.sandbox import SandboxConfig

INS = {"leetcode": Path("data/gen_inputs/inputs.jsonl"), "synth": Path("data/synth/inputs.jsonl")}
OUT = Path("data/exec_filter/samples.jsonl")
METRICS = Path("metrics/exec_filter.json")
FIELDS = {"task_id": str, "entry": str, "code": str, "inputs": list}


def run(cfg: ExecFilterConfig) -> dict:
    """Both sources through the same filter; metrics: LeetCode's counts (the funnel's) at the top,
    the generated programs' under ``synth``."""
    config = SandboxConfig(timeout_s=float(cfg.timeout_s), memory_mb=cfg.memory_mb, workers=cfg.workers)
    tracer = functools.partial(trace_many, sandbox_config=config, progress="exec_filter")
    kept, metrics = [], {}
    for source, path in INS.items():
        samples, counts = exec_filter(
            read_jsonl(path, FIELDS),
            tracer=tracer,
            render=render_trace,
            max_trace_chars=cfg.max_trace_chars,
            keep_none=cfg.keep_none,
        )
        kept += samples
        if source == "leetcode":  # the funnel's counts (top level); the generated programs' under "synth"
            metrics.update(counts)
        else:
            metrics[source] = counts
    write_jsonl(OUT, kept)
    write_json(METRICS, metrics)
    return metrics


@stage_main
def main() -> None:
    cfg = load_config(ExecFilterConfig)
    with stage_run("exec_filter", cfg.as_dict()):
        metrics = run(cfg)
    print(f"exec_filter: {metrics['pairs_in']} pairs -> {metrics['samples']} samples; {metrics['dropped']}")


if __name__ == "__main__":
    main()
