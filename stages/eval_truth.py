"""Stage eval_truth: the benchmarks of the evaluation, each sample traced to its ConTra truth.

Run: ``python -m stages.eval_truth --out data/eval/truth --metrics metrics/eval_truth.json`` (its cmd in
dvc.yaml: ``dvc repro eval_truth``). Reads ``params.yaml: eval_truth`` and ``base.mirror``. Writes
``<out>/<bench>.jsonl`` (one row per problem: its fields plus the truth JSON, or the reason it could not be
traced) and the metrics (counts per benchmark against the paper's, untraceable samples, the
cross-check of traced against stored outputs). LiveCodeBench-O lives only on the Hugging Face
hub: offline it is skipped with a message (recorded in the metrics), not an error.
"""

from __future__ import annotations

import argparse
import shutil
import sys

from codethinker.config import load_config
from codethinker.config.data import EvalTruthConfig
from codethinker.data.io import write_json
from codethinker.data.sources import SourceError
from codethinker.evaluation.benchmarks import BenchmarkUnavailable, canonical_name, prepare, write_truth
from codethinker.ops.stage import path, stage_args, stage_main, stage_run
from codethinker.sandbox import Sandbox, SandboxConfig

ARGS = stage_args(
    "eval_truth",
    __doc__,
    out=path("folder of the truth files, <bench>.jsonl each (emptied first)"),
    metrics=path("counts per benchmark, skipped benchmarks with the reason (JSON)"),
)


def run(cfg: EvalTruthConfig, paths: argparse.Namespace) -> dict:
    mirror = cfg.base.mirror_root()
    if mirror is None:
        print(f"eval_truth: no mirror at base.mirror={cfg.base.mirror!r}; downloading", file=sys.stderr)
    try:
        names = [canonical_name(b) for b in cfg.benchmarks]
    except ValueError as exc:
        raise SystemExit(f"eval_truth: {exc}") from None
    out = paths.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    metrics: dict = {}
    config = SandboxConfig(timeout_s=float(cfg.timeout_s))
    with Sandbox(config) as sb:
        for name in names:
            try:
                bench = prepare(
                    name,
                    mirror,
                    cfg.cache_dir,
                    download=cfg.download,
                    sandbox=sb,
                )
            except BenchmarkUnavailable as exc:
                print(f"eval_truth: {exc}", file=sys.stderr)
                metrics[name] = {"skipped": str(exc)}
                continue
            except SourceError as exc:
                raise SystemExit(f"eval_truth: {exc}") from None
            write_truth(out / f"{name}.jsonl", bench)
            metrics[name] = bench.counts()
            c = metrics[name]
            print(
                f"eval_truth: {name}: {c['traced']} of {c['problems']} traced (paper: {c['paper_count']}), "
                f"{c['untraceable']} untraceable, {c['stored_output_mismatches']} differ from the stored output",
                file=sys.stderr,
            )
    write_json(paths.metrics, metrics)
    return metrics


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(EvalTruthConfig)
    params = cfg.as_dict()
    with stage_run("eval_truth", params) as tracked:
        metrics = run(cfg, paths)
        for name, m in metrics.items():
            if "skipped" in m:
                tracked.set_tags({f"{name}.skipped": m["skipped"]})


if __name__ == "__main__":
    main()
