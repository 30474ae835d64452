"""Stage codegen_truth: the outcome reward's oracle: every problem's reference solution through the judge.

Run: ``python -m stages.codegen_truth`` (or ``dvc repro codegen_truth``). Reads ``params.yaml: codegen``
(the judge's limits; ``truth_limit``: problems judged, null: all) and ``data/codegen/problems.jsonl``;
writes ``metrics/codegen_truth.json``: problems judged and passed, tests passed, and every failure
with its status, per-test statuses and reason (a reference that fails is reported, never dropped).
"""

from __future__ import annotations

import sys
from pathlib import Path

from codethinker.codegen.judge import check_references
from codethinker.codegen.task import CodegenProblem
from codethinker.config import load_config
from codethinker.config.codegen import CodegenConfig
from codethinker.data.io import read_jsonl, write_json
from codethinker.ops.stage import stage_main, stage_run

PROBLEMS = Path("data/codegen/problems.jsonl")
METRICS = Path("metrics/codegen_truth.json")


def run(cfg: CodegenConfig) -> dict:
    problems = [CodegenProblem.from_json(r) for r in read_jsonl(PROBLEMS, {"id": str, "tests": list})]
    metrics = check_references(problems, cfg.judge, cfg.truth_limit)
    write_json(METRICS, metrics)
    return metrics


@stage_main
def main() -> None:
    cfg = load_config(CodegenConfig)
    with stage_run("codegen_truth", cfg.as_dict()):
        m = run(cfg)
    print(
        f"codegen_truth: {m['passed']} of {m['checked']} reference solutions pass ({m['seconds']:.0f} s)"
        + "".join(f"\n  {f['id']}: {f['status']}: {f['detail']}" for f in m["failures"]),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
