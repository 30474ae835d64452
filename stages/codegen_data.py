"""Stage codegen_data: the code-generation task's problems (LeetCodeDataset train splits, decontaminated).

Run: ``python -m stages.codegen_data`` (or ``dvc repro codegen_data``). Reads ``params.yaml: codegen``
(the similarity model and threshold default to ``dedup``'s) and ``base.mirror``; writes
``data/codegen/problems.jsonl`` (one :class:`~codethinker.codegen.task.CodegenProblem` a line, ``split``
train or heldout), ``data/codegen/similarity.jsonl`` (each problem's nearest benchmark program) and
``metrics/codegen_data.json`` (every drop with its reason). Rules: docs/codegen.md.
"""

from __future__ import annotations

from pathlib import Path

from codethinker.codegen.pipeline import build_problems
from codethinker.config import load_config
from codethinker.config.codegen import CodegenConfig
from codethinker.data.io import write_json, write_jsonl
from codethinker.ops.stage import stage_main, stage_run

OUT = Path("data/codegen/problems.jsonl")
SIMILARITY = Path("data/codegen/similarity.jsonl")
METRICS = Path("metrics/codegen_data.json")


def run(cfg: CodegenConfig) -> dict:
    problems, nearest, metrics = build_problems(cfg)
    write_jsonl(OUT, (p.to_json() for p in problems))
    write_jsonl(SIMILARITY, nearest)
    write_json(METRICS, metrics)
    return metrics


@stage_main
def main() -> None:
    cfg = load_config(CodegenConfig)
    with stage_run("codegen_data", cfg.as_dict()):
        m = run(cfg)
    kept = f"{m['train']} train + {m['heldout']} held out"
    print(f"codegen_data: {m['problems_in']} problems -> {kept}; dropped {m['dropped']}")


if __name__ == "__main__":
    main()
