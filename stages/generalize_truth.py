"""Stage generalize_truth: the oracle check of every generalization benchmark: each problem's own
reference answer (canonical solution, given input, reference number) must be judged a pass.

Run: ``python -m stages.generalize_truth --metrics metrics/generalize_truth.json`` (its cmd in dvc.yaml: ``dvc
repro generalize_truth``). Reads ``params.yaml: generalize`` (``benchmarks``; ``truth_limit``: problems checked
per benchmark, null: all). Writes the metrics: per benchmark the problems checked, passed,
and every failure with its status and reason (a reference that fails is reported, never dropped).
"""

from __future__ import annotations

import argparse
import sys
import time

from tqdm.auto import tqdm

from codethinker.config import load_config
from codethinker.config.generalize import GeneralizeConfig
from codethinker.data.io import write_json
from codethinker.data.sources import SourceError
from codethinker.evaluation.generalize import oracle_check, runnable
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

ARGS = stage_args(
    "generalize_truth",
    __doc__,
    metrics=path("per benchmark: references checked, passed, every failure with its reason (JSON)"),
)


def run(cfg: GeneralizeConfig, paths: argparse.Namespace) -> dict:
    mirror, cache = cfg.base.mirror_root(), cfg.cache_dir
    limit = cfg.truth_limit
    out: dict = {}
    bar = tqdm(list(runnable(cfg.benchmarks)), desc="generalize_truth", unit="bench", file=sys.stderr)
    for name, task, why in bar:
        bar.set_postfix_str(name)
        if why is not None:
            out[name] = {"skipped": why}
            continue
        assert task is not None
        t0 = time.perf_counter()
        try:
            items = task.load(mirror, cache)
        except SourceError as exc:
            raise SystemExit(f"generalize_truth: {exc}") from None
        res = oracle_check(task, items[:limit] if limit else items)
        res.update(total=len(items), seconds=round(time.perf_counter() - t0, 2))
        out[name] = res
        if res["failures"]:  # a reference judged wrong: every one, by name (all passing: the end line's count)
            bar.write(
                f"generalize_truth: {name}: {res['passed']} of {res['n']} references pass"
                + "".join(f"\n  {f['id']}: {f['status']}: {f['detail']}" for f in res["failures"]),
                file=sys.stderr,
            )
    write_json(paths.metrics, out)
    return out


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(GeneralizeConfig)
    with stage_run("generalize_truth", {"benchmarks": cfg.benchmarks, "truth_limit": cfg.truth_limit}) as tracked:
        for name, m in run(cfg, paths).items():
            if "skipped" in m:
                tracked.set_tags({f"{name}.skipped": m["skipped"]})


if __name__ == "__main__":
    main()
