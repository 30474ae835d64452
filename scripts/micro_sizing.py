"""Sizing experiment for the learnable micro run: how many tokens must a from-scratch
micro Qwen2 see before it writes valid ConTra traces for held-out short synthetic programs?

    python scripts/micro_sizing.py data --out .gpu            # here: generate, trace, render (1 min)
    OUT=results python scripts/micro_sizing.py train --data .gpu   # on a GPU (8 min on one H200)

``data`` makes 24,000 training programs and 300 held-out ones (distinct code) with
``codethinker.data.synth``, traces them in the sandbox and renders template-thought ConTra rows.
``train`` trains a byte-level BPE tokenizer (2,048 tokens, digits split) and two Qwen2 sizes on
them (loss on the answer only), and at token milestones scores greedy answers to 100 held-out
prompts with the project's CRM (format-valid rate, answer accuracy, fully consistent rate).
Evidence for docs/results/micro_sizing.md, not a pipeline stage.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_data(out: Path, n_train: int = 24000, n_held: int = 300) -> None:
    sys.path.insert(0, str(ROOT))
    from codethinker.contra.render import render_prompt, render_trace
    from codethinker.contra.tracer import trace_many
    from codethinker.data.sft import template_thoughts
    from codethinker.data.synth import generate

    def rows(seed: int, n: int) -> list[dict]:
        progs = generate(n, seed=seed)
        outs = trace_many([(p.source, p.input, p.entry) for p in progs])
        return [
            {
                "prompt": render_prompt(o.flow)[0]["content"],
                "completion": render_trace(o.flow, template_thoughts(o.flow)),
                "flow": o.flow.to_json(),
                "code": p.source,
            }
            for p, o in zip(progs, outs, strict=True)
            if o.flow is not None
        ]

    train = rows(123, n_train)
    seen = {r["code"] for r in train}
    held = [r for r in rows(999, 2 * n_held) if r["code"] not in seen][:n_held]
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(out / "train.jsonl.gz", "wt") as f:
        for r in train:
            f.write(json.dumps({"prompt": r["prompt"], "completion": r["completion"]}) + "\n")
    with gzip.open(out / "held.jsonl.gz", "wt") as f:
        for r in held:
            f.write(json.dumps(r) + "\n")
    print(f"{len(train)} training rows, {len(held)} held-out rows in {out}")


def train_main(data_dir: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2Config, Qwen2ForCausalLM

    sys.path.insert(0, str(ROOT))
    from codethinker.contra.tracer import Flow
    from codethinker.rewards.crm import crm_score

    OUT = os.environ.get("OUT", "/tmp/out")
    os.makedirs(OUT, exist_ok=True)
    LOG = open(os.path.join(OUT, "micro_log.jsonl"), "w")  # noqa: SIM115 (open for the whole run)
    DEV = "cuda" if torch.cuda.is_available() else "cpu"
    SMOKE = os.environ.get("SMOKE") == "1"
    BUDGET_S = float(os.environ.get("BUDGET_S", "420"))
    T_START = time.time()

    def log(**kw):
        kw["t"] = round(time.time() - T_START, 1)
        print(json.dumps(kw), flush=True)
        LOG.write(json.dumps(kw) + "\n")
        LOG.flush()

    def load(name):
        with gzip.open(os.path.join(data_dir, name), "rt") as f:
            return [json.loads(line) for line in f]

    train = load("train.jsonl.gz")
    held = load("held.jsonl.gz")
    if SMOKE:
        train, held = train[:300], held[:4]
    SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

    def chat(prompt):
        return f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2048, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator((r["prompt"] + "\n" + r["completion"] for r in train), trainer)
    IM_END = tok.token_to_id("<|im_end|>")
    PAD = tok.token_to_id("<|endoftext|>")
    V = tok.get_vocab_size()

    seqs = []
    for r in train:
        p = tok.encode(chat(r["prompt"])).ids
        c = [*tok.encode(r["completion"]).ids, IM_END]
        seqs.append((p, c))
    lens = sorted(len(p) + len(c) for p, c in seqs)
    ntok = sum(lens)
    log(
        event="data",
        rows=len(seqs),
        tokens=ntok,
        vocab=V,
        len_p50=lens[len(lens) // 2],
        len_max=lens[-1],
        chars_per_token=round(sum(len(r["prompt"]) + len(r["completion"]) for r in train) / ntok, 2),
    )

    def batches(rng, tokens_per_batch):
        order = list(range(len(seqs)))
        rng.shuffle(order)
        # group by length in chunks of 50 batches to limit padding
        chunk = 4096
        for s in range(0, len(order), chunk):
            idx = sorted(order[s : s + chunk], key=lambda i: len(seqs[i][0]) + len(seqs[i][1]))
            cur, mx = [], 0
            groups = []
            for i in idx:
                L = len(seqs[i][0]) + len(seqs[i][1])
                if cur and max(mx, L) * (len(cur) + 1) > tokens_per_batch:
                    groups.append(cur)
                    cur, mx = [], 0
                cur.append(i)
                mx = max(mx, L)
            if cur:
                groups.append(cur)
            rng.shuffle(groups)
            yield from groups

    def collate(group):
        L = max(len(seqs[i][0]) + len(seqs[i][1]) for i in group)
        ids = torch.full((len(group), L), PAD, dtype=torch.long)
        lab = torch.full((len(group), L), -100, dtype=torch.long)
        att = torch.zeros((len(group), L), dtype=torch.long)
        for b, i in enumerate(group):
            p, c = seqs[i]
            x = p + c
            ids[b, : len(x)] = torch.tensor(x)
            lab[b, len(p) : len(x)] = torch.tensor(c)
            att[b, : len(x)] = 1
        return ids.to(DEV), lab.to(DEV), att.to(DEV)

    @torch.no_grad()
    def evaluate(model, n, max_new):
        model.eval()
        prompts = held[:n]
        res = {"fmt": 0, "answer_ok": 0, "full": 0, "reward": 0.0, "rcs": 0.0, "ended": 0, "reasons": {}}
        bs = 50
        for s in range(0, len(prompts), bs):
            part = prompts[s : s + bs]
            enc = [tok.encode(chat(r["prompt"])).ids for r in part]
            L = max(map(len, enc))
            ids = torch.full((len(enc), L), PAD, dtype=torch.long)
            att = torch.zeros((len(enc), L), dtype=torch.long)
            for b, e in enumerate(enc):  # left padding
                ids[b, L - len(e) :] = torch.tensor(e)
                att[b, L - len(e) :] = 1
            with torch.autocast(DEV, dtype=torch.bfloat16, enabled=DEV == "cuda"):
                out = model.generate(
                    input_ids=ids.to(DEV),
                    attention_mask=att.to(DEV),
                    max_new_tokens=max_new,
                    do_sample=False,
                    eos_token_id=IM_END,
                    pad_token_id=PAD,
                )
            for b, r in enumerate(part):
                gen = out[b, L:].tolist()
                ended = IM_END in gen
                if ended:
                    gen = gen[: gen.index(IM_END)]
                text = tok.decode(gen)
                sc = crm_score(text, Flow.from_json(r["flow"]))
                res["fmt"] += sc["fmt"]
                res["answer_ok"] += sc["answer_ok"]
                res["full"] += int(sc["r_proc"] == 2.0)
                res["reward"] += sc["reward"]
                res["rcs"] += sc["rcs"]
                res["ended"] += int(ended)
                if sc["reason"]:
                    res["reasons"][sc["reason"]] = res["reasons"].get(sc["reason"], 0) + 1
        for k in ("fmt", "answer_ok", "full", "reward", "rcs", "ended"):
            res[k] = round(res[k] / len(prompts), 4)
        if prompts:
            res["sample"] = text[:1500]
        model.train()
        return res

    def run(name, hidden, layers, lr, max_tokens, milestones, tokens_per_batch=32768):
        torch.manual_seed(0)
        cfg = Qwen2Config(
            vocab_size=V,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=hidden // 64,
            num_key_value_heads=hidden // 64,
            intermediate_size=3 * hidden,
            max_position_embeddings=2048,
            tie_word_embeddings=True,
            bos_token_id=PAD,
            eos_token_id=IM_END,
            pad_token_id=PAD,
        )
        model = Qwen2ForCausalLM(cfg).to(DEV)
        nparam = sum(p.numel() for p in model.parameters())
        opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
        total_steps = max(1, int(max_tokens / (tokens_per_batch * 0.8)))
        warm = min(100, total_steps // 10 + 1)

        def lr_at(step):
            if step < warm:
                return lr * (step + 1) / warm
            prog = min(1.0, (step - warm) / max(1, total_steps - warm))
            return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * prog)))

        log(event="start", run=name, params=nparam, hidden=hidden, layers=layers, lr=lr)
        rng = random.Random(0)
        seen, step, t0, ms = 0, 0, time.time(), list(milestones)
        losses = []
        while ms:
            for group in batches(rng, tokens_per_batch):
                ids, lab, att = collate(group)
                for g in opt.param_groups:
                    g["lr"] = lr_at(step)
                with torch.autocast(DEV, dtype=torch.bfloat16, enabled=DEV == "cuda"):
                    loss = model(input_ids=ids, attention_mask=att, labels=lab).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                seen += int(att.sum())
                step += 1
                losses.append(float(loss.detach()))
                if step % 50 == 0:
                    log(
                        event="loss",
                        run=name,
                        step=step,
                        tokens=seen,
                        loss=round(sum(losses[-50:]) / 50, 4),
                        tok_s=round(seen / (time.time() - t0)),
                    )
                if ms and seen >= ms[0]:
                    ms.pop(0)
                    ev = evaluate(model, 4 if SMOKE else 100, 64 if SMOKE else 900)
                    log(event="eval", run=name, step=step, tokens=seen, loss=round(losses[-1], 4), **ev)
                if not ms or time.time() - T_START > BUDGET_S:
                    ms = []
                    break
        return model

    if SMOKE:
        run("smoke", 128, 2, 2e-3, 20000, [10000, 20000], tokens_per_batch=4096)
    else:
        M = 1_000_000
        run("h256_l4", 256, 4, 2e-3, 30 * M, [2 * M, 5 * M, 10 * M, 20 * M, 30 * M])
        run("h512_l8", 512, 8, 1e-3, 30 * M, [2 * M, 5 * M, 10 * M, 20 * M, 30 * M])
    log(event="done")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("data").add_argument("--out", type=Path, default=Path(".gpu"))
    sub.add_parser("train").add_argument("--data", type=Path, default=Path(".gpu"))
    args = ap.parse_args()
    if args.cmd == "data":
        make_data(args.out)
    else:
        train_main(args.data)


if __name__ == "__main__":
    main()
