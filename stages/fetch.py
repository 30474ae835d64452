"""Stage fetch: LeetCodeDataset train splits and the similarity filter's benchmark programs.

Run: ``python -m stages.fetch --problems data/fetch/problems.jsonl --benchmarks data/fetch/benchmarks.jsonl
--metrics metrics/fetch.json`` (its cmd in dvc.yaml: ``dvc repro fetch``). Reads ``params.yaml: fetch`` and
``base.mirror``; writes the problems, the benchmark programs and the metrics. Files come from the mirror
(read in place) or their pinned public URLs, and must match the sha256 figures of PROVENANCE.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codethinker.config import load_config
from codethinker.config.data import FetchConfig
from codethinker.data.io import write_json, write_jsonl
from codethinker.data.sources import SOURCES, load_benchmarks, load_leetcode, load_livecodebench, resolve
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

ARGS = stage_args(
    "fetch",
    __doc__,
    problems=path("the LeetCode problems, one a line (JSONL)"),
    benchmarks=path("the benchmark programs the dedup stage compares with (JSONL)"),
    metrics=path("counts and each file's origin (JSON)"),
)


def run(cfg: FetchConfig, paths: argparse.Namespace) -> dict:
    mirror = cfg.base.mirror_root()
    if mirror is None:
        print(f"fetch: no mirror at base.mirror={cfg.base.mirror!r}; downloading", file=sys.stderr)
    cache = cfg.cache_dir
    opts = {"download": cfg.download, "timeout_s": float(cfg.timeout_s)}
    origins: dict[str, str] = {}

    def get(key: str) -> Path:
        if key not in SOURCES:
            raise SystemExit(f"fetch: unknown source {key!r} in params.yaml; known: {', '.join(SOURCES)}")
        path, origins[key] = resolve(SOURCES[key], mirror, cache, **opts)
        return path

    splits = [(name.removesuffix("-train"), get(f"leetcode/{name}")) for name in cfg.leetcode]
    problems, counts = load_leetcode(splits)
    wanted = set(cfg.benchmarks)
    benchmarks = load_benchmarks(
        get("cruxeval") if "cruxeval" in wanted else None, get("reval") if "reval" in wanted else None
    )
    lcb_note = "not requested"
    if "livecodebench" in wanted:
        lcb, why = load_livecodebench()
        benchmarks += lcb
        lcb_note = why or f"{len(lcb)} programs"
        if why:
            print(f"fetch: {why}", file=sys.stderr)
    write_jsonl(paths.problems, problems)
    write_jsonl(paths.benchmarks, benchmarks)
    per_bench = {b: sum(1 for r in benchmarks if r["benchmark"] == b) for b in sorted(wanted)}
    metrics = {
        "leetcode_rows": counts["rows"],
        "leetcode_duplicates": counts["duplicates"],
        "problems": counts["problems"],
        "benchmark_programs": per_bench,
        "livecodebench": lcb_note,
        "origins": origins,
    }
    write_json(paths.metrics, metrics)
    return metrics


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(FetchConfig)
    params = cfg.as_dict()
    with stage_run("fetch", params) as tracked:
        metrics = run(cfg, paths)
        tracked.set_tags({"livecodebench": metrics["livecodebench"]})
    print(f"fetch: {metrics['problems']} problems, benchmark programs {metrics['benchmark_programs']}")


if __name__ == "__main__":
    main()
