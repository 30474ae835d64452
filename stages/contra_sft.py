"""Stage contra_sft: ConTra CoT extraction, the SFT/GRPO split by function, and the funnel.

Run: ``python -m stages.contra_sft --samples data/dedup/samples.jsonl --fetch-metrics metrics/fetch.json
--ast-filter-metrics metrics/ast_filter.json --gen-inputs-metrics metrics/gen_inputs.json --exec-filter-metrics
metrics/exec_filter.json --dedup-metrics metrics/dedup.json --sft data/contra_sft/sft.jsonl --grpo-train
data/contra_sft/grpo_train.parquet --grpo-eval data/contra_sft/grpo_eval.parquet --metrics metrics/contra_sft.json
--funnel metrics/funnel.json --funnel-md docs/funnel.md`` (its cmd in dvc.yaml: ``dvc repro contra_sft``).
Reads ``params.yaml: contra_sft``, dedup's samples and the data stages' metrics; writes the SFT rows (chat
messages: ConTra prompt, teacher trace), the GRPO prompts and the held-out ones (verl's parquet schema), its
metrics, and the whole funnel: its JSON (one entry per profile) and its markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections import Counter
from pathlib import Path

import pandas as pd

from codethinker.config import load_config
from codethinker.config.data import ContraSFTConfig
from codethinker.contra.tracer import Flow
from codethinker.data.funnel import build_funnel, funnel_markdown
from codethinker.data.io import atomic_write, read_jsonl, write_json, write_jsonl
from codethinker.data.llm import ChatClient
from codethinker.data.sft import extract_traces, grpo_record, sft_record, split_by_function
from codethinker.data.shapes import overlap_audit, split_generated
from codethinker.data.synth import sample_source
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

STAGES = ("fetch", "ast_filter", "gen_inputs", "exec_filter", "dedup")  # the funnel's stages before this one
ARGS = stage_args(
    "contra_sft",
    __doc__,
    samples=path("dedup's samples (JSONL)", rows=True),
    **{f"{s}_metrics": path(f"the {s} stage's metrics: its step of the funnel (JSON)") for s in STAGES},
    sft=path("the SFT rows: chat messages (JSONL)"),
    grpo_train=path("the GRPO prompts (verl's parquet schema)"),
    grpo_eval=path("the held-out GRPO prompts (verl's parquet schema)"),
    metrics=path("this stage's counts (JSON)"),
    funnel=path("the whole funnel, one entry per profile (JSON, kept across runs)"),
    funnel_md=path("the funnel's tables (markdown, kept across runs)"),
)


def _parquet(path: Path, rows: list[dict]) -> None:
    with atomic_write(path, "wb") as fh:
        pd.DataFrame(rows).to_parquet(fh, index=False)


def run(cfg: ContraSFTConfig, paths: argparse.Namespace) -> dict:
    seed = cfg.base.seed
    prompt = cfg.prompt
    samples = read_jsonl(paths.samples, {"id": str, "task_id": str, "truth": str})
    synth = [s for s in samples if sample_source(s) == "synth"]
    leetcode = [s for s in samples if sample_source(s) == "leetcode"]
    n = cfg.synth_split
    split = split_generated(synth, seed, n.eval, n.in_distribution, n.grpo, others=(s["code"] for s in leetcode))
    sft_half, grpo_half = split_by_function(leetcode, seed)
    sft_half = split["sft"] + sft_half
    teacher = cfg.teacher
    flows = [Flow.from_json(s["truth"]) for s in sft_half]
    traces, rejected, llm_stats = _teacher_traces(cfg, flows)
    sft_rows = [sft_record(s, f, t, prompt) for s, f, t in zip(sft_half, flows, traces, strict=True) if t is not None]
    # Held-out LeetCode prompts: whole functions, the first ones of the GRPO half's order.
    n_eval = cfg.eval_functions
    grpo_fns = list(dict.fromkeys(s["task_id"] for s in grpo_half))
    held = set(grpo_fns[:n_eval])
    src = cfg.data_source
    train = split["grpo"] + [s for s in grpo_half if s["task_id"] not in held]
    heldout = {
        "shape_disjoint": split["shape_disjoint"],
        "in_distribution": split["in_distribution"],
        "leetcode": [s for s in grpo_half if s["task_id"] in held],
    }
    evals = [(kind, s) for kind, rows in heldout.items() for s in rows]
    write_jsonl(paths.sft, sft_rows)
    _parquet(paths.grpo_train, [grpo_record(s, src, "train", i, prompt) for i, s in enumerate(train)])
    eval_rows = [grpo_record(s, src, "eval", i, prompt, heldout=kind) for i, (kind, s) in enumerate(evals)]
    _parquet(paths.grpo_eval, eval_rows)
    trained = [s for s, t in zip(sft_half, traces, strict=True) if t is not None] + train
    by_source = lambda rows: {k: sum(sample_source(r) == k for r in rows) for k in ("synth", "leetcode")}  # noqa: E731
    metrics = {
        "teacher": teacher,
        "prompt": prompt,
        "samples_in": len(samples),
        "sft_by_source": by_source(sft_rows),
        "grpo_train_by_source": by_source(train),
        "grpo_eval_by_source": by_source([s for _, s in evals]),
        "heldout": {k: {"n": len(rows), "functions": len({s["task_id"] for s in rows})} for k, rows in heldout.items()},
        "overlap": overlap_audit(heldout, trained, progress="contra_sft: held-out overlap audit"),
        "sft_candidates": len(sft_half),
        "traces": len(sft_rows),
        "rejected": dict(rejected.most_common()),
        "sft": len(sft_rows),
        "grpo_train": len(train),
        "grpo_eval": len(evals),
        "sft_functions": len({s["task_id"] for s in sft_half}),
        "grpo_functions": len(grpo_fns),
    }
    if llm_stats is not None:
        metrics["llm"] = llm_stats
    write_json(paths.metrics, metrics)
    _write_funnel(metrics, cfg.base.profile, paths)
    return metrics


def _teacher_traces(cfg: ContraSFTConfig, flows: list[Flow]) -> tuple[list, Counter, dict | None]:
    """The teacher's trace of each flow (None where rejected), the rejection counts, and the LLM
    clients' request counts (None with the offline template teacher)."""
    clients = []
    if cfg.teacher == "llm":
        for a in range(cfg.attempts):
            seeded = dataclasses.replace(cfg.llm, seed=(cfg.llm.seed or 0) + a)
            clients.append(ChatClient(seeded, cfg.cache_dir))
    try:
        traces, rejected = extract_traces(flows, teacher=cfg.teacher, clients=clients)
    finally:
        for c in clients:
            c.close()
    keys = ("requests", "cache_hits", "retries", "failures")
    return traces, rejected, ({k: sum(c.stats[k] for c in clients) for k in keys} if clients else None)


def _write_funnel(metrics: dict, profile: str, paths: argparse.Namespace) -> None:
    """The whole funnel of this profile, from every data stage's metrics, beside the other profile's."""
    stage_metrics = {k: json.loads(getattr(paths, f"{k}_metrics").read_text()) for k in STAGES}
    funnels = json.loads(paths.funnel.read_text()) if paths.funnel.is_file() else {}
    funnels[profile] = build_funnel({**stage_metrics, "contra_sft": metrics}, profile)
    funnels = {p: funnels[p] for p in ("default", "full") if p in funnels}
    write_json(paths.funnel, funnels)
    with atomic_write(paths.funnel_md) as fh:
        fh.write(funnel_markdown(funnels))


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(ContraSFTConfig)
    with stage_run("contra_sft", cfg.as_dict()):
        metrics = run(cfg, paths)
    print(f"contra_sft: SFT {metrics['sft']} traces, GRPO {metrics['grpo_train']} + {metrics['grpo_eval']} held out")


if __name__ == "__main__":
    main()
