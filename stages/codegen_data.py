"""Stage codegen_data: the code-generation task's problems (LeetCodeDataset train splits, decontaminated).

Run: ``python -m stages.codegen_data --out data/codegen/problems.jsonl --similarity data/codegen/similarity.jsonl
--metrics metrics/codegen_data.json`` (its cmd in dvc.yaml: ``dvc repro codegen_data``). Reads ``params.yaml:
codegen`` (the similarity model and threshold default to ``dedup``'s) and ``base.mirror``; writes the problems
(one :class:`~codethinker.codegen.task.CodegenProblem` a line, ``split`` train or heldout), each problem's nearest
benchmark program and the metrics (every drop with its reason). Rules: docs/codegen.md.
"""

from __future__ import annotations

import argparse

from codethinker.codegen.pipeline import build_problems
from codethinker.config import load_config
from codethinker.config.codegen import CodegenConfig
from codethinker.data.io import write_json, write_jsonl
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

ARGS = stage_args(
    "codegen_data",
    __doc__,
    out=path("the kept problems, split train or heldout (JSONL)"),
    similarity=path("each problem's nearest benchmark program (JSONL)"),
    metrics=path("counts and every drop with its reason (JSON)"),
)


def run(cfg: CodegenConfig, paths: argparse.Namespace) -> dict:
    problems, nearest, metrics = build_problems(cfg)
    write_jsonl(paths.out, (p.to_json() for p in problems))
    write_jsonl(paths.similarity, nearest)
    write_json(paths.metrics, metrics)
    return metrics


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(CodegenConfig)
    with stage_run("codegen_data", cfg.as_dict()):
        m = run(cfg, paths)
    kept = f"{m['train']} train + {m['heldout']} held out"
    print(f"codegen_data: {m['problems_in']} problems -> {kept}; dropped {m['dropped']}")


if __name__ == "__main__":
    main()
