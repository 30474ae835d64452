"""Stage dedup (funnel step 4): drop samples whose code is too close to a benchmark program.

Run: ``python -m stages.dedup`` (or ``dvc repro dedup``). Reads ``params.yaml: dedup``,
``data/exec_filter/samples.jsonl`` and ``data/fetch/benchmarks.jsonl``; writes
``data/dedup/samples.jsonl``, ``data/dedup/similarity.jsonl`` (each function's nearest
benchmark program) and ``metrics/dedup.json``. Model and rule: :mod:`codethinker.data.similarity`.
"""

from __future__ import annotations

from pathlib import Path

from codethinker.config import load_config
from codethinker.config.data import DedupConfig
from codethinker.data.io import read_jsonl, write_json, write_jsonl
from codethinker.data.similarity import open_encoder, similarity_filter
from codethinker.data.synth import sample_source
from codethinker.ops.stage import stage_main, stage_run

SAMPLES = Path("data/exec_filter/samples.jsonl")
BENCHMARKS = Path("data/fetch/benchmarks.jsonl")
OUT = Path("data/dedup/samples.jsonl")
SIMILARITY = Path("data/dedup/similarity.jsonl")
METRICS = Path("metrics/dedup.json")


def run(cfg: DedupConfig) -> dict:
    model = cfg.model
    samples = read_jsonl(SAMPLES, {"id": str, "task_id": str, "code": str, "truth": str})
    benchmarks = read_jsonl(BENCHMARKS, {"benchmark": str, "id": str, "code": str})
    encode = open_encoder(model, cfg.batch_size, cfg.cache_dir)
    threshold = cfg.threshold
    synth = [s for s in samples if sample_source(s) == "synth"]
    kept, per_fn, counts = similarity_filter(
        [s for s in samples if sample_source(s) != "synth"], benchmarks, encode, threshold
    )
    metrics = {"model": model, **counts, "nearest_top5": per_fn[:5]}  # LeetCode's: the funnel's counts
    if synth:  # the generated programs, compared with the same benchmark programs
        kept_synth, per_fn_synth, metrics["synth"] = similarity_filter(synth, benchmarks, encode, threshold)
        kept += kept_synth
        per_fn = sorted(per_fn + per_fn_synth, key=lambda r: -r["max_similarity"])
    write_jsonl(OUT, kept)
    write_jsonl(SIMILARITY, per_fn)
    write_json(METRICS, metrics)
    return metrics


@stage_main
def main() -> None:
    cfg = load_config(DedupConfig)
    with stage_run("dedup", cfg.as_dict()):
        metrics = run(cfg)
    print(f"dedup: {metrics['samples_in']} -> {metrics['samples']} samples ({metrics['functions']} functions)")


if __name__ == "__main__":
    main()
