"""Stage gen_inputs (funnel step 2): ``n_inputs`` input sets per function.

Run: ``python -m stages.gen_inputs`` (or ``dvc repro gen_inputs``). Reads ``params.yaml:
gen_inputs`` and ``data/ast_filter/functions.jsonl``; writes ``data/gen_inputs/inputs.jsonl``
and ``metrics/gen_inputs.json``. ``functions`` is the profile's slice (a deterministic sample
by base.seed; 0 = all). Backends: ``mutate`` (offline, deterministic) or ``llm`` (an
OpenAI-compatible endpoint, answers cached under ``cache_dir``).
"""

from __future__ import annotations

from pathlib import Path

from codethinker.data.inputs import generate, select_functions
from codethinker.data.io import read_jsonl, write_json, write_jsonl
from codethinker.data.llm import ChatClient, ChatConfig
from codethinker.ops.stage import stage_main, stage_run
from codethinker.params import load_section

IN = Path("data/ast_filter/functions.jsonl")
OUT = Path("data/gen_inputs/inputs.jsonl")
METRICS = Path("metrics/gen_inputs.json")
FIELDS = {"task_id": str, "entry": str, "code": str, "params": list, "annotations": dict, "examples": list}


def run(params: dict) -> dict:
    base = params["base"]
    functions = read_jsonl(IN, FIELDS)
    limit = params.get("functions", 0)
    chosen = select_functions(functions, int(limit or 0), int(base.get("seed", 0)))
    backend = params.get("backend", "mutate")
    client = None
    if backend == "llm":
        client = ChatClient(ChatConfig.from_params(params.get("llm", {})), params.get("cache_dir"))
    try:
        records, counts = generate(
            chosen,
            backend=backend,
            n=int(params.get("n_inputs", 15)),
            seed=int(base.get("seed", 0)),
            mutate=params.get("mutate", {}),
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
    params = load_section("gen_inputs")
    with stage_run("gen_inputs", params):
        metrics = run(params)
    print(f"gen_inputs: {metrics['functions']} functions -> {metrics['pairs']} pairs ({metrics['backend']})")


if __name__ == "__main__":
    main()
