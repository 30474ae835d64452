"""Stage gen_inputs (funnel step 2): ``n_inputs`` input sets per function.

Run: ``python -m stages.gen_inputs --functions data/ast_filter/functions.jsonl --out data/gen_inputs/inputs.jsonl
--metrics metrics/gen_inputs.json`` (its cmd in dvc.yaml: ``dvc repro gen_inputs``). Reads ``params.yaml:
gen_inputs`` and ast_filter's functions; writes the input sets and the metrics. ``functions`` is the profile's
slice (a deterministic sample by base.seed; 0 = all). Backends: ``mutate`` (offline, deterministic) or ``llm``
(an OpenAI-compatible endpoint, answers cached under ``cache_dir``).
"""

from __future__ import annotations

import argparse

from codethinker.config import as_dict, load_config
from codethinker.config.data import GenInputsConfig
from codethinker.data.inputs import generate, select_functions
from codethinker.data.io import read_jsonl, write_json, write_jsonl
from codethinker.data.llm import ChatClient
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

ARGS = stage_args(
    "gen_inputs",
    __doc__,
    functions=path("ast_filter's functions (JSONL)", rows=True),
    out=path("the input sets per function (JSONL)"),
    metrics=path("counts (JSON)"),
)
FIELDS = {"task_id": str, "entry": str, "code": str, "params": list, "annotations": dict, "examples": list}


def run(cfg: GenInputsConfig, paths: argparse.Namespace) -> dict:
    functions = read_jsonl(paths.functions, FIELDS)
    chosen = select_functions(functions, cfg.functions or 0, cfg.base.seed)
    backend = cfg.backend
    client = None
    if backend == "llm":
        client = ChatClient(cfg.llm, cfg.cache_dir)
    try:
        records, counts = generate(
            chosen,
            backend=backend,
            n=cfg.n_inputs,
            seed=cfg.base.seed,
            mutate=as_dict(cfg.mutate),
            client=client,
        )
    finally:
        if client is not None:
            client.close()
    write_jsonl(paths.out, records)
    metrics = {"functions_available": len(functions), "backend": backend, **counts}
    if client is not None:
        metrics["llm"] = dict(client.stats)
    write_json(paths.metrics, metrics)
    return metrics


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(GenInputsConfig)
    with stage_run("gen_inputs", cfg.as_dict()):
        metrics = run(cfg, paths)
    print(f"gen_inputs: {metrics['functions']} functions -> {metrics['pairs']} pairs ({metrics['backend']})")


if __name__ == "__main__":
    main()
