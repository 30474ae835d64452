"""Stage synth (curriculum): short generated functions with one literal input each.

Run: ``python -m stages.synth --out data/synth/inputs.jsonl --metrics metrics/synth.json`` (its cmd in dvc.yaml:
``dvc repro synth``). Reads ``params.yaml: synth`` (``programs``, ``seed``, ``max_statements``, ``max_params``,
``forms``); writes the programs in ``gen_inputs``' record schema
(``task_id`` ``synth/<n>``, ``entry``, ``code``, ``inputs``), so the same funnel runs them: the
execution filter traces them in the sandbox, dedup compares them with the benchmark programs, and
contra_sft renders their ConTra traces. ``programs: 0`` writes an empty file (the ``full`` profile).
A from-scratch policy learns the trace format on these first (docs/training.md, "The micro run").
"""

from __future__ import annotations

from codethinker.config import load_config
from codethinker.config.data import SynthConfig
from codethinker.data.io import write_json, write_jsonl
from codethinker.data.synth import generate
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

ARGS = stage_args(
    "synth",
    __doc__,
    out=path("the generated programs as input records (JSONL)"),
    metrics=path("counts (JSON)"),
)


def records(n: int, seed: int, max_statements: int = 3, max_params: int = 2, forms: str = "basic") -> list[dict]:
    """``n`` distinct (code, input) programs as input records: one record per distinct code (its
    inputs together, so a split by ``task_id`` never puts the same code on both sides)."""
    by_code: dict[str, dict] = {}
    for p in generate(n, seed=seed, max_statements=max_statements, max_params=max_params, forms=forms):
        rec = by_code.setdefault(p.source, {"entry": p.entry, "code": p.source, "inputs": []})
        rec["inputs"].append(p.input)
    width = len(str(max(len(by_code) - 1, 0)))
    return [{"task_id": f"synth/{i:0{width}d}", **r} for i, r in enumerate(by_code.values())]


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(SynthConfig)
    n = cfg.programs or 0
    seed = cfg.seed + cfg.base.seed
    with stage_run("synth", cfg.as_dict()):
        recs = records(n, seed, cfg.max_statements, cfg.max_params, cfg.forms)
        pairs = sum(len(r["inputs"]) for r in recs)
        metrics = {"requested": n, "pairs": pairs, "functions": len(recs), "not_generated": n - pairs}
        write_jsonl(paths.out, recs)
        write_json(paths.metrics, metrics)
    print(f"synth: {metrics['pairs']} programs ({metrics['functions']} distinct functions) -> {paths.out}")


if __name__ == "__main__":
    main()
