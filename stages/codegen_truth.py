"""Stage codegen_truth: the outcome reward's oracle: every problem's reference solution through the judge.

Run: ``python -m stages.codegen_truth --problems data/codegen/problems.jsonl --metrics metrics/codegen_truth.json``
(its cmd in dvc.yaml: ``dvc repro codegen_truth``). Reads ``params.yaml: codegen`` (the judge's limits;
``truth_limit``: problems judged, null: all) and codegen_data's problems; writes the metrics: problems judged and
passed, tests passed, and every failure
with its status, per-test statuses and reason (a reference that fails is reported, never dropped).
"""

from __future__ import annotations

import argparse
import sys

from codethinker.codegen.judge import check_references
from codethinker.codegen.task import CodegenProblem
from codethinker.config import load_config
from codethinker.config.codegen import CodegenConfig
from codethinker.data.io import read_jsonl, write_json
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

ARGS = stage_args(
    "codegen_truth",
    __doc__,
    problems=path("codegen_data's problems (JSONL)", rows=True),
    metrics=path("references judged and passed, every failure with its reason (JSON)"),
)


def run(cfg: CodegenConfig, paths: argparse.Namespace) -> dict:
    problems = [CodegenProblem.from_json(r) for r in read_jsonl(paths.problems, {"id": str, "tests": list})]
    metrics = check_references(problems, cfg.judge, cfg.truth_limit)
    write_json(paths.metrics, metrics)
    return metrics


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(CodegenConfig)
    with stage_run("codegen_truth", cfg.as_dict()):
        m = run(cfg, paths)
    print(
        f"codegen_truth: {m['passed']} of {m['checked']} reference solutions pass ({m['seconds']:.0f} s)"
        + "".join(f"\n  {f['id']}: {f['status']}: {f['detail']}" for f in m["failures"]),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
