"""Stage fetch: LeetCodeDataset train splits and the similarity filter's benchmark programs.

Run: ``python -m stages.fetch`` (or ``dvc repro fetch``). Reads ``params.yaml: fetch`` and
``base.mirror``; writes ``data/fetch/problems.jsonl``, ``data/fetch/benchmarks.jsonl`` and
``metrics/fetch.json``. Files come from the mirror (read in place) or their pinned public
URLs, and must match the sha256 figures of PROVENANCE.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from codethinker.config import load_config
from codethinker.config.data import FetchConfig
from codethinker.data.io import write_json, write_jsonl
from codethinker.data.sources import SOURCES, load_benchmarks, load_leetcode, load_livecodebench, resolve
from codethinker.ops.stage import stage_main, stage_run

OUT = Path("data/fetch")
METRICS = Path("metrics/fetch.json")


def run(cfg: FetchConfig) -> dict:
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
    write_jsonl(OUT / "problems.jsonl", problems)
    write_jsonl(OUT / "benchmarks.jsonl", benchmarks)
    per_bench = {b: sum(1 for r in benchmarks if r["benchmark"] == b) for b in sorted(wanted)}
    metrics = {
        "leetcode_rows": counts["rows"],
        "leetcode_duplicates": counts["duplicates"],
        "problems": counts["problems"],
        "benchmark_programs": per_bench,
        "livecodebench": lcb_note,
        "origins": origins,
    }
    write_json(METRICS, metrics)
    return metrics


@stage_main
def main() -> None:
    cfg = load_config(FetchConfig)
    params = cfg.as_dict()
    with stage_run("fetch", params) as tracked:
        metrics = run(cfg)
        tracked.set_tags({"livecodebench": metrics["livecodebench"]})
    print(f"fetch: {metrics['problems']} problems, benchmark programs {metrics['benchmark_programs']}")


if __name__ == "__main__":
    main()
