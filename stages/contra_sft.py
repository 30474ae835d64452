"""Stage contra_sft: ConTra CoT extraction, the SFT/GRPO split by function, and the funnel.

Run: ``python -m stages.contra_sft`` (or ``dvc repro contra_sft``). Reads ``params.yaml:
contra_sft`` and ``data/dedup/samples.jsonl``; writes ``data/contra_sft/sft.jsonl`` (chat
messages: ConTra prompt, teacher trace), ``data/contra_sft/grpo_train.parquet`` and
``grpo_eval.parquet`` (verl's schema), ``metrics/contra_sft.json``, and the whole funnel:
``metrics/funnel.json`` (one entry per profile) and ``docs/funnel.md``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from codethinker.contra.tracer import Flow
from codethinker.data.funnel import build_funnel, funnel_markdown
from codethinker.data.io import atomic_write, read_jsonl, write_json, write_jsonl
from codethinker.data.llm import ChatClient, ChatConfig
from codethinker.data.sft import extract_traces, grpo_record, sft_record, split_by_function
from codethinker.params import by_profile, load_section
from codethinker.tracking import stage_run

IN = Path("data/dedup/samples.jsonl")
OUT = Path("data/contra_sft")
METRICS, FUNNEL, FUNNEL_MD = Path("metrics/contra_sft.json"), Path("metrics/funnel.json"), Path("docs/funnel.md")
STAGES = ("fetch", "ast_filter", "gen_inputs", "exec_filter", "dedup")


def _parquet(path: Path, rows: list[dict]) -> None:
    with atomic_write(path, "wb") as fh:
        pd.DataFrame(rows).to_parquet(fh, index=False)


def run(params: dict) -> dict:
    base = params["base"]
    seed = int(base.get("seed", 0))
    samples = read_jsonl(IN, {"id": str, "task_id": str, "truth": str})
    sft_half, grpo_half = split_by_function(samples, seed)
    teacher = params.get("teacher", "template")
    clients = []
    if teacher == "llm":
        cfg = ChatConfig.from_params(params.get("llm", {}))
        for a in range(int(params.get("attempts", 2))):
            seeded = dataclasses.replace(cfg, seed=(cfg.seed or 0) + a)
            clients.append(ChatClient(seeded, params.get("cache_dir")))
    flows = [Flow.from_json(s["truth"]) for s in sft_half]
    try:
        traces, rejected = extract_traces(flows, teacher=teacher, clients=clients)
    finally:
        for c in clients:
            c.close()
    sft_rows = [sft_record(s, f, t) for s, f, t in zip(sft_half, flows, traces, strict=True) if t is not None]
    # Held-out GRPO prompts: whole functions, the first ones of the GRPO half's order.
    n_eval = int(by_profile(params.get("eval_functions", 8), base))
    grpo_fns = list(dict.fromkeys(s["task_id"] for s in grpo_half))
    held = set(grpo_fns[:n_eval])
    src = params.get("data_source", "leetcode_reasoning")
    train = [s for s in grpo_half if s["task_id"] not in held]
    evals = [s for s in grpo_half if s["task_id"] in held]
    write_jsonl(OUT / "sft.jsonl", sft_rows)
    _parquet(OUT / "grpo_train.parquet", [grpo_record(s, src, "train", i) for i, s in enumerate(train)])
    _parquet(OUT / "grpo_eval.parquet", [grpo_record(s, src, "eval", i) for i, s in enumerate(evals)])
    metrics = {
        "teacher": teacher,
        "samples_in": len(samples),
        "sft_candidates": len(sft_half),
        "traces": len(sft_rows),
        "rejected": dict(rejected.most_common()),
        "sft": len(sft_rows),
        "grpo_train": len(train),
        "grpo_eval": len(evals),
        "sft_functions": len({s["task_id"] for s in sft_half}),
        "grpo_functions": len(grpo_fns),
    }
    if clients:
        metrics["llm"] = {
            k: sum(c.stats[k] for c in clients) for k in ("requests", "cache_hits", "retries", "failures")
        }
    write_json(METRICS, metrics)
    stage_metrics = {k: json.loads(Path(f"metrics/{k}.json").read_text()) for k in STAGES}
    profile = str(base.get("profile", "default"))
    funnels = json.loads(FUNNEL.read_text()) if FUNNEL.is_file() else {}
    funnels[profile] = build_funnel({**stage_metrics, "contra_sft": metrics}, profile)
    funnels = {p: funnels[p] for p in ("default", "full") if p in funnels}
    write_json(FUNNEL, funnels)
    with atomic_write(FUNNEL_MD) as fh:
        fh.write(funnel_markdown(funnels))
    return metrics


def main() -> None:
    params = load_section("contra_sft")
    with stage_run("contra_sft", params) as tracked:
        metrics = run(params)
        tracked.log_metrics({k: v for k, v in metrics.items() if k != "teacher"})
        tracked.log_artifact(FUNNEL_MD)
    print(f"contra_sft: SFT {metrics['sft']} traces, GRPO {metrics['grpo_train']} + {metrics['grpo_eval']} held out")


if __name__ == "__main__":
    main()
