"""Stage dedup (funnel step 4): drop samples whose code is too close to a benchmark program.

Run: ``python -m stages.dedup --samples data/exec_filter/samples.jsonl --benchmarks data/fetch/benchmarks.jsonl
--out data/dedup/samples.jsonl --similarity data/dedup/similarity.jsonl --metrics metrics/dedup.json`` (its cmd
in dvc.yaml: ``dvc repro dedup``). Reads ``params.yaml: dedup``, exec_filter's samples and fetch's benchmark
programs; writes the kept samples, each function's nearest benchmark program and the metrics. Model and rule:
:mod:`codethinker.data.similarity`.
"""

from __future__ import annotations

import argparse

from codethinker.config import load_config
from codethinker.config.data import DedupConfig
from codethinker.data.io import read_jsonl, write_json, write_jsonl
from codethinker.data.similarity import open_encoder, similarity_filter
from codethinker.data.synth import sample_source
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

ARGS = stage_args(
    "dedup",
    __doc__,
    samples=path("exec_filter's samples (JSONL)", rows=True),
    benchmarks=path("fetch's benchmark programs (JSONL)"),
    out=path("the samples kept (JSONL)"),
    similarity=path("each function's nearest benchmark program (JSONL)"),
    metrics=path("counts (JSON)"),
)


def run(cfg: DedupConfig, paths: argparse.Namespace) -> dict:
    model = cfg.model
    samples = read_jsonl(paths.samples, {"id": str, "task_id": str, "code": str, "truth": str})
    benchmarks = read_jsonl(paths.benchmarks, {"benchmark": str, "id": str, "code": str})
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
    write_jsonl(paths.out, kept)
    write_jsonl(paths.similarity, per_fn)
    write_json(paths.metrics, metrics)
    return metrics


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(DedupConfig)
    with stage_run("dedup", cfg.as_dict()):
        metrics = run(cfg, paths)
    print(f"dedup: {metrics['samples_in']} -> {metrics['samples']} samples ({metrics['functions']} functions)")


if __name__ == "__main__":
    main()
