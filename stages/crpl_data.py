"""Stage crpl_data: ReCode's CRPL preference pairs (t+ > t-, t+ > t, t > t-) on the codegen problems.

Run: ``python -m stages.crpl_data --problems data/codegen/problems.jsonl --train data/crpl/train.jsonl --eval
data/crpl/eval.jsonl --metrics metrics/crpl_data.json`` (its cmd in dvc.yaml: ``dvc repro crpl_data``). Reads
``params.yaml: recode`` (backend, bug_tries, the llm teacher), ``codegen`` (the train splits whose ``response``
is the base reasoning, the judge's limits) and codegen_data's problems (kept, decontaminated, with their split);
writes the training pairs, the pairs of the held-out problems and the metrics (pairs per type, drops with their
reasons). Rules: docs/recode.md.
"""

from __future__ import annotations

import argparse

from codethinker.codegen.crpl import build_pairs, split_pairs
from codethinker.codegen.crpl_llm import llm_teacher
from codethinker.codegen.pipeline import source_paths
from codethinker.codegen.task import CodegenProblem
from codethinker.config.codegen import CodegenConfig
from codethinker.config.loader import SECTIONS, ParamsFile
from codethinker.config.recode import RecodeConfig
from codethinker.data.io import iter_jsonl, write_json, write_jsonl
from codethinker.data.llm import ChatClient
from codethinker.data.sources import load_leetcode
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

ARGS = stage_args(
    "crpl_data",
    __doc__,
    problems=path("codegen_data's problems (JSONL)", rows=True),
    train=path("the preference pairs of the training problems (JSONL)"),
    eval=path("the pairs of the held-out problems (JSONL)"),
    metrics=path("pairs per type, drops with their reasons (JSON)"),
)


def run(cfg: RecodeConfig, codegen: CodegenConfig, paths: argparse.Namespace) -> dict:
    problems = [CodegenProblem.from_json(r) for r in iter_jsonl(paths.problems)][: cfg.limit]
    splits = [(n.removesuffix("-train"), p) for n, p in source_paths(codegen, codegen.leetcode)]
    records, _ = load_leetcode(splits, extra=("response",))
    responses = {r["task_id"]: r["response"] for r in records}
    client = ChatClient(cfg.llm, cfg.cache_dir) if cfg.backend == "llm" else None
    try:
        pairs, metrics = build_pairs(
            problems,
            responses,
            seed=cfg.base.seed,
            backend=cfg.backend,
            bug_tries=cfg.bug_tries,
            limits=codegen.judge,
            teacher=llm_teacher(client) if client is not None else None,
            progress="crpl_data: judge",
        )
        if client is not None:
            metrics["llm"] = {**client.describe(), "stats": dict(client.stats)}
    finally:
        if client is not None:
            client.close()
    train, heldout = split_pairs(pairs)
    write_jsonl(paths.train, train)
    write_jsonl(paths.eval, heldout)
    metrics = {"backend": cfg.backend, **metrics}
    write_json(paths.metrics, metrics)
    return metrics


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    params = ParamsFile.read(sections=SECTIONS)  # read once: recode's section and codegen's limits
    cfg, codegen = params.section(RecodeConfig), params.section(CodegenConfig)
    with stage_run("crpl_data", cfg.as_dict()):
        m = run(cfg, codegen, paths)
    print(
        f"crpl_data: {m['problems_in']} problems -> {m['pairs_train']} train + {m['pairs_eval']} eval pairs; "
        f"dropped {m['dropped']}"
    )


if __name__ == "__main__":
    main()
