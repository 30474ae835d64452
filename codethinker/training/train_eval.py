"""Before SFT / after SFT / after GRPO on held-out GRPO prompts: format-valid rate, mean CRM
reward, RCS, answer accuracy and mean response tokens (one greedy response per prompt unless
``samples`` > 1).

Models are evaluated one after another, each in a fresh engine (vLLM where it runs, else
transformers' generate), so only one is in memory at a time.

>>> run_train_eval({"before_sft": "models/base"}, rows, EvalParams())  # doctest: +SKIP
{'before_sft': {'fmt_rate': 0.0, 'reward': 0.0, 'rcs': 0.0, 'answer_acc': 0.0, 'response_tokens': 256.0, ...}}
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["EvalParams", "evaluate_engine", "run_train_eval"]

MAX_SEQS = 256  # vLLM's CPU default for max_num_seqs: the most sequences an engine runs at once


@dataclass
class EvalParams:
    max_prompts: int | None = field(default=None, metadata={"help": "first N held-out prompts (None: all)"})
    max_tokens: int = field(default=1024, metadata={"help": "response length limit"})
    temperature: float = field(default=0.0, metadata={"help": "0: greedy"})
    samples: int = field(default=1, metadata={"help": "responses per prompt"})
    engine: str = field(default="auto", metadata={"help": "vllm | hf | auto"})
    max_model_len: int = field(default=4096, metadata={"help": "vLLM context"})
    kv_cache_gib: float | str | None = field(
        default="auto",
        metadata={
            "help": "KV cache of the vLLM CPU build, in GiB: auto = room for every prompt x samples at once "
            "(at most 256 sequences) of max_model_len tokens (from the model's config.json, +20%, >= 0.25 GiB); "
            "a number = that many; null = vLLM's share of RAM (0.15). Not used on a GPU"
        },
    )
    crm: dict[str, Any] = field(default_factory=dict, metadata={"help": "CRM switches (as in grpo)"})
    seed: int = field(default=0, metadata={"help": "sampling seed"})

    def __post_init__(self) -> None:
        from codethinker.engines.kv_cache import parse_kv_setting

        parse_kv_setting(self.kv_cache_gib, "train_eval.kv_cache_gib")

    def kv_params(self) -> Any:
        """The params a vLLM KV-cache error names."""
        from codethinker.engines.kv_cache import KVParamNames

        return KVParamNames(
            "train_eval.kv_cache_gib",
            ("train_eval.max_prompts", "train_eval.max_model_len"),
            "train_eval.max_model_len",
        )


def evaluate_engine(engine: Any, rows: list[dict[str, Any]], p: EvalParams) -> dict[str, float]:
    from codethinker.contra.tracer import Flow
    from codethinker.rewards.crm import CRMConfig, crm_score

    cfg = CRMConfig.from_dict(p.crm)
    prompts = [engine.apply_chat_template(r["prompt"]) for r in rows]
    t0 = time.time()
    outs = engine.continue_prefixes(
        prompts, p.samples, stop=["[/TRACE]"], max_tokens=p.max_tokens, temperature=p.temperature, seed=p.seed
    )
    gen_s = time.time() - t0
    scores, tokens = [], []
    for row, comps in zip(rows, outs, strict=True):
        flow = Flow.from_json(row["truth"])
        for c in comps:
            scores.append(crm_score(c.text, flow, cfg))
            tokens.append(c.n_tokens)
    n = max(len(scores), 1)
    return {
        "n": len(scores),
        "fmt_rate": sum(s["fmt"] for s in scores) / n,
        "reward": sum(s["reward"] for s in scores) / n,
        "rcs": sum(s["rcs"] for s in scores) / n,
        "r_proc": sum(s["r_proc"] for s in scores) / n,
        "answer_acc": sum(s.get("answer_ok", 0) for s in scores) / n,
        "response_tokens": sum(tokens) / n,
        "gen_s": round(gen_s, 1),
    }


def run_train_eval(
    models: dict[str, str | Path], rows: list[dict[str, Any]], p: EvalParams
) -> dict[str, dict[str, float]]:
    """Evaluate each named model in turn; a missing local model folder is reported, not fatal."""
    from codethinker.training.rollout import make_engine

    rows = rows[: p.max_prompts] if p.max_prompts else rows
    out: dict[str, dict[str, float]] = {}
    for name, path in models.items():
        if str(path).startswith(("models/", "./", "/")) and not Path(path).exists():
            out[name] = {"missing": 1.0}
            continue
        kind, eng = make_engine(
            p.engine,
            path,
            enable_lora=False,
            max_model_len=p.max_model_len,
            kv_cache_gib=p.kv_cache_gib,
            max_num_seqs=max(1, min(len(rows) * p.samples, MAX_SEQS)),
            kv_params=p.kv_params(),
            seed=p.seed,
        )
        if kind == "hf":
            from codethinker.engines.hf import HFEngine

            eng = HFEngine(path)
        try:
            out[name] = evaluate_engine(eng, rows, p)
        finally:
            if hasattr(eng, "close"):
                eng.close()
            del eng
    return out
