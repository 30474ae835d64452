"""The training and rollout paths against their baselines, on one device, same model and batch, one run.

    python benchmarks/bench_gpu.py [--shape 0.5b|micro] [--batch 16] [--tokens 356] [--steps 20]
        [--rollout-prompts 16] [--rollout-tokens 128] [--hf-caches dynamic,static]
        [--skip sft,bare,compiled,rollout,vllm] [--json out.json]

Made for a lent GPU (CUDA; bf16 autocast over fp32 weights, the ``bf16-mixed`` policy), and it runs on a CPU
too (fp32), where it is a smoke run. The model is random-weight Qwen2 in the shape asked for with the Qwen2
tokenizer (``../shared/models/qwen2-tokenizer`` or ``--tokenizer``): ``0.5b`` is Qwen2.5-0.5B's shape
(896 wide, 24 layers, vocabulary 151,646), ``micro`` the embedded default's. The rows are ``--batch`` chat
rows of about ``--tokens`` tokens (random words; the same rows for every measurement). Measured, each after
``--warmup`` untimed steps:

- ``sft``: the project's SFT (:func:`codethinker.training.sft.make_sft_trainer`: TRL's trainer, the loss and
  precision of ``SFTParams``), ``--loss logits`` or ``fused``;
- ``bare``: a bare PyTorch loop on the same tokens (AdamW, the model's own loss), and ``compiled``: the same
  loop with ``torch.compile``;
- ``rollout``: the HF engine (:class:`codethinker.engines.hf.HFEngine`, what GRPO uses without vLLM)
  against one plain ``model.generate`` call on the same prompts, and vLLM where it is installed; and a DBS
  round (``dbs_round``: a real DBSRun's second round, ``--rollout-prompts`` prompts, budget 4, limit
  ``--rollout-tokens``; :mod:`bench_hf_rounds`) as one ``generate`` call per (budget, limit) group against
  the HF engine's batched path (``continue_requests``: one padded batch) with each KV cache of
  ``--hf-caches`` (``compiled``: CUDA only), and the same round on vLLM (``continue_requests``).

Reported: tokens/s of each, the ratio to the compiled (else bare) loop and to plain ``generate``, of the
batched round to the per-group one and of vLLM's round to the HF engine's best (``vllm_vs_hf_round``: the
per-token time of the HF engine's rollouts against vLLM's), and peak memory (CUDA: ``max_memory_allocated``;
CPU: the process's peak RSS). Not a test: compare the ratios.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = {
    "0.5b": {
        "hidden_size": 896,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "num_hidden_layers": 24,
        "intermediate_size": 4864,
        "max_position_embeddings": 4096,
    },
    "micro": {},  # TinyShape's defaults: the embedded default's policy
}


def _peak_gib() -> float:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _reset_peak() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def rows(tok, n: int, tokens: int, seed: int = 0) -> list[dict]:
    """``n`` prompt/completion chat rows of about ``tokens`` tokens (a third prompt), random vocabulary words."""
    rng = random.Random(seed)
    words = [w for w in (tok.decode([i]).strip() for i in rng.sample(range(1000, 30000), 3000)) if w.isalpha()]

    def text(k: int) -> str:
        return " ".join(rng.choice(words) for _ in range(k))

    return [
        {
            "prompt": [{"role": "user", "content": text(tokens // 3)}],
            "completion": [{"role": "assistant", "content": text(2 * tokens // 3)}],
        }
        for _ in range(n)
    ]


def bench_sft(model: Path, tok, data: list[dict], a: argparse.Namespace, real: int) -> dict:
    """``real``: the batch's tokens (every step trains on the same ``--batch`` rows, in order)."""
    from datasets import Dataset

    from codethinker.training.sft import SFTParams, make_sft_trainer, sft_config

    p = SFTParams(finetune="full", batch_size=a.batch, grad_accum=1, max_steps=a.warmup + a.steps, loss=a.loss,
                  max_length=4 * a.tokens, save_steps=10**6, logging_steps=1, learning_rate=1e-5)  # fmt: skip
    with tempfile.TemporaryDirectory() as ck:
        args = sft_config(Path(ck), p, len(data) * (a.warmup + a.steps), ordered=True)
        trainer = make_sft_trainer(model, tok, Dataset.from_list(data * (a.warmup + a.steps)), args, p)
        times: list[float] = []

        from transformers import TrainerCallback

        class Clock(TrainerCallback):
            def on_step_begin(self, *_: object, **__: object) -> None:
                _sync()
                self.t = time.perf_counter()

            def on_step_end(self, *_: object, **__: object) -> None:
                _sync()
                times.append(time.perf_counter() - self.t)

        from codethinker.training.callbacks import quiet_progress

        trainer.add_callback(Clock())
        _reset_peak()
        quiet_progress(trainer).train()
    timed = times[a.warmup :]
    return {"tokens_per_s": real * len(timed) / sum(timed), "s_per_step": sum(timed) / len(timed),
            "peak_gib": _peak_gib(), "loss": a.loss}  # fmt: skip


def batch_tensors(tok, data: list[dict], device: str):
    """The rows as one padded batch (the chat template's text), labels on the real tokens only."""

    texts = [tok.apply_chat_template(r["prompt"] + r["completion"], tokenize=False) for r in data]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    labels = enc.input_ids.masked_fill(enc.attention_mask == 0, -100)
    return enc.input_ids.to(device), enc.attention_mask.to(device), labels.to(device), int(enc.attention_mask.sum())


def bench_bare(model_dir: Path, tok, data: list[dict], a: argparse.Namespace, compiled: bool) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).to(device)  # fp32 masters
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=device == "cuda")
    ids, mask, labels, real = batch_tensors(tok, data, device)
    fwd = torch.compile(model) if compiled else model
    autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda")
    _reset_peak()
    times = []
    for _ in range(a.warmup + a.steps):
        _sync()
        t0 = time.perf_counter()
        with autocast:
            loss = fwd(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        _sync()
        times.append(time.perf_counter() - t0)
    timed = times[a.warmup :]
    return {"tokens_per_s": real * len(timed) / sum(timed), "s_per_step": sum(timed) / len(timed),
            "peak_gib": _peak_gib(), "padding_share": 1 - real / ids.numel()}  # fmt: skip


def bench_rollout(model_dir: Path, tok, data: list[dict], a: argparse.Namespace) -> dict:
    """The HF engine, one plain ``generate`` and (installed, not skipped) vLLM on the same prompts."""
    import torch

    from codethinker.engines.hf import HFEngine

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = "bfloat16" if device == "cuda" else "float32"
    eng = HFEngine(model_dir, device=device, dtype=dtype, batch_size=a.rollout_prompts)
    prompts = [eng.apply_chat_template(r["prompt"]) for r in data[: a.rollout_prompts]]
    out: dict = {}
    _sync()
    t0 = time.perf_counter()
    done = eng.continue_prefixes(prompts, 1, stop=[], max_tokens=a.rollout_tokens, temperature=1.0, seed=0)
    _sync()
    n = sum(c.n_tokens for row in done for c in row)
    out["hf_engine_tokens_per_s"] = n / (time.perf_counter() - t0)
    tok.padding_side = "left"
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    _sync()
    t0 = time.perf_counter()
    gen = eng.model.generate(**enc, max_new_tokens=a.rollout_tokens, min_new_tokens=a.rollout_tokens, do_sample=True,
                             pad_token_id=tok.pad_token_id)  # fmt: skip
    _sync()
    out["generate_tokens_per_s"] = (gen.shape[1] - enc.input_ids.shape[1]) * len(prompts) / (time.perf_counter() - t0)
    out["dbs_round"] = hf_round(eng, prompts, a)
    eng.close()
    try:
        from codethinker.engines.vllm import VLLMEngine
    except ImportError:
        return out
    if a.skip_vllm:
        return out
    from bench_hf_rounds import dbs_round

    v = VLLMEngine(model_dir, max_model_len=4 * a.tokens + 2 * a.rollout_tokens)
    t0 = time.perf_counter()
    done = v.continue_prefixes(prompts, 1, stop=[], max_tokens=a.rollout_tokens, temperature=1.0, seed=0)
    out["vllm_tokens_per_s"] = sum(c.n_tokens for row in done for c in row) / (time.perf_counter() - t0)
    reqs = dbs_round(prompts, 4, a.rollout_tokens)
    t0 = time.perf_counter()
    done = v.continue_requests(reqs)
    wall = time.perf_counter() - t0
    out["vllm_round_tokens_per_s"] = sum(c.n_tokens for r in done for row in r for c in row) / wall
    v.close()
    return out


def hf_round(eng, prompts: list[str], a: argparse.Namespace) -> dict:
    """A DBS round on the HF engine: per-group calls against the batched path, per KV cache of ``--hf-caches``
    (the engines share ``eng``'s model; benchmarks/bench_hf_rounds.py)."""
    import torch
    from bench_hf_rounds import compare

    from codethinker.engines.hf import HFEngine

    caches = ["dynamic", *(c for c in a.hf_caches.split(",") if c and c != "dynamic")]
    if not torch.cuda.is_available() and "compiled" in caches:
        caches.remove("compiled")  # transformers compiles generate on accelerators only
    engines = {c: HFEngine(eng.model, eng.tokenizer, batch_size=a.rollout_prompts * 4, cache=c) for c in caches}
    res = compare(engines, prompts, 4, a.rollout_tokens, repeats=1)
    for name, runs in res["runs"].items():
        res[f"{name}_tokens_per_s"] = runs[0]["tokens_per_s"]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="0.5b")
    ap.add_argument("--tokenizer", default=str(ROOT.parent / "shared" / "models" / "qwen2-tokenizer"))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=356, help="tokens per row, about")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--loss", choices=["logits", "fused"], default="logits")
    ap.add_argument("--rollout-prompts", type=int, default=16)
    ap.add_argument("--rollout-tokens", type=int, default=128)
    ap.add_argument("--hf-caches", default="dynamic,static", help="the DBS round's batched HF paths: dynamic, "
                    "static, compiled (CUDA)")  # fmt: skip
    ap.add_argument("--skip", default="", help="comma-separated: sft, bare, compiled, rollout, vllm")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    a = ap.parse_args()
    from codethinker.logs import quiet_libraries

    quiet_libraries()  # before torch and vLLM are imported: they read their levels then
    import torch

    from codethinker.training.bootstrap import build_tiny_model

    skip = set(filter(None, a.skip.split(",")))
    a.skip_vllm = "vllm" in skip
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({torch.get_num_threads()} threads)"
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_model(Path(tmp) / "m", a.tokenizer, seed=0, **SHAPES[a.shape])
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(model))
        tok.pad_token = tok.pad_token or tok.eos_token
        data = rows(tok, a.batch, a.tokens)
        res: dict = {"device": device, "shape": a.shape, "batch": a.batch, "torch": torch.__version__}
        if "bare" not in skip:
            res["bare"] = bench_bare(model, tok, data, a, compiled=False)
        if "compiled" not in skip:
            res["compiled"] = bench_bare(model, tok, data, a, compiled=True)
        if "sft" not in skip:
            res["sft"] = bench_sft(model, tok, data, a, batch_tensors(tok, data, "cpu")[3])
        if "rollout" not in skip:
            res["rollout"] = bench_rollout(model, tok, data, a)
    base = res.get("compiled") or res.get("bare")
    if base and "sft" in res:
        res["sft_vs_loop"] = res["sft"]["tokens_per_s"] / base["tokens_per_s"]
    if "rollout" in res:
        r = res["rollout"]
        res["hf_engine_vs_generate"] = r["hf_engine_tokens_per_s"] / r["generate_tokens_per_s"]
        rnd = r["dbs_round"]
        best = max(v for k, v in rnd.items() if k.startswith("batched_") and k.endswith("_tokens_per_s"))
        res["hf_round_batched_vs_per_group"] = rnd["speedup_vs_per_group"]
        if "vllm_round_tokens_per_s" in r:
            res["vllm_vs_hf_round"] = r["vllm_round_tokens_per_s"] / best
    print(json.dumps(res, indent=1))
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
