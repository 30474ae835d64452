"""Stage gen_inputs (funnel step 2): ``n_inputs`` input sets per function.

Run: ``python -m stages.gen_inputs`` (or ``dvc repro gen_inputs``). Reads ``params.yaml:
gen_inputs`` and ``data/ast_filter/functions.jsonl``; writes ``data/gen_inputs/inputs.jsonl``
and ``metrics/gen_inputs.json``. ``functions`` is the profile's slice (a deterministic sample
by base.seed; 0 = all). Backends: ``mutate`` (offline, deterministic) or ``llm`` (an
OpenAI-compatible endpoint, answers cached under ``cache_dir``).
"""

from __future__ import annotations

from pathlib import Path

from codethinker.config import as_dict, load_config
from codethinker.config.data import GenInputsConfig
from codethinker.data.inputs import generate, select_functions
from codethinker.data.io import read_jsonl, write_json, write_jsonl
from codethinker.data.llm import ChatClient
from codethinker.ops.stage import stage_main, stage_run

IN = Path("data/ast_filter/functions.jsonl")
OUT = Path("data/gen_inputs/inputs.jsonl")
METRICS = Path("metrics/gen_inputs.json")
FIELDS = {"task_id": str, "entry": str, "code": str, "params": list, "annotations": dict, "examples": list}


def run(cfg: GenInputsConfig) -> dict:
    functions = read_jsonl(IN, FIELDS)
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
    write_jsonl(OUT, records)
    metrics = {"functions_available": len(functions), "backend": backend, **counts}
    if client is not None:
        metrics["llm"] = dict(client.stats)
    write_json(METRICS, metrics)
    return metrics


@stage_main
def main() -> None:
    cfg = load_config(GenInputsConfig)
    with stage_run("gen_inputs", cfg.as_dict()):
        metrics = run(cfg)
    print(f"gen_inputs: {metrics['functions']} functions -> {metrics['pairs']} pairs ({metrics['backend']})")


if __name__ == "__main__":
    main()
