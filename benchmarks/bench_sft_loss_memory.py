"""Peak memory of SFT's loss on a hub model's vocabulary: ``sft.loss: logits`` against ``fused`` (TRL's chunked
LM head), one forward and backward on a CPU.

    python benchmarks/bench_sft_loss_memory.py [--batches 1,2,4,8,64] [--tokens 356] [--hidden 64]
        [--tokenizer ../shared/models/qwen2-tokenizer] [--max-gib 10] [--json out.json]

The model is a random one-layer Qwen2, ``--hidden`` wide, with the Qwen2 tokenizer's vocabulary (151,646 tokens),
so the loss, not the model, holds the memory. A micro-batch is ``batch x --tokens`` random tokens, the last two
thirds of each row labelled (the completion), in fp32 (the CPU's precision). Measured: one
``trainer.compute_loss`` and ``backward`` of the project's trainer (:func:`codethinker.training.sft.make_sft_trainer`
with ``sft.loss``), each (loss, batch) in a fresh interpreter: the process's resident set at its peak during the
step (Linux's VmHWM, reset through ``/proc/self/clear_refs`` just before) less the resident set before it, and
the step's seconds. ``fused`` runs at every size (its tiles, at most 4,096 tokens x 32,768 vocabulary entries, cap
its memory); ``logits`` holds the whole batch x tokens x vocabulary logits, so a size whose peak on the line through
the smaller batches is over ``--max-gib`` is not run and the line gives its figure, marked ``estimated``. Not a
test: compare the ratios.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GIB = 2**30


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def child(model: str, loss: str, batch: int, tokens: int) -> dict:
    import torch
    from datasets import Dataset

    from codethinker.training.sft import SFTParams, load_tokenizer, make_sft_trainer, sft_config

    tok = load_tokenizer(model)
    row = {"prompt": [{"role": "user", "content": "x"}], "completion": [{"role": "assistant", "content": "y"}]}
    p = SFTParams(finetune="full", loss=loss, max_length=4 * tokens)
    with tempfile.TemporaryDirectory() as ck:
        trainer = make_sft_trainer(model, tok, Dataset.from_list([row]), sft_config(Path(ck), p, 1, True), p)
    g = torch.Generator().manual_seed(batch)
    ids = torch.randint(1000, 100_000, (batch, tokens), generator=g)
    labels = ids.clone()
    labels[:, : tokens // 3] = -100
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    n = (labels[:, 1:] != -100).sum()
    trainer.model.train()
    before = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    t0 = time.perf_counter()
    value = trainer.compute_loss(trainer.model, dict(inputs), num_items_in_batch=n)
    value.backward()
    seconds = time.perf_counter() - t0
    peak = _status_kib("VmHWM")
    return {"loss": loss, "batch": batch, "peak_gib": round((peak - before) / 2**20, 3), "seconds": round(seconds, 2),
            "value": float(value.detach())}  # fmt: skip


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares ``a + b x`` through ``points``."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - b * mx, b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", default="1,2,4,8,64")
    ap.add_argument("--tokens", type=int, default=356)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--tokenizer", default=str(ROOT.parent / "shared" / "models" / "qwen2-tokenizer"))
    ap.add_argument("--max-gib", type=float, default=10.0, help="do not run a size predicted above this")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", nargs=3, metavar=("MODEL", "LOSS", "BATCH"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    from codethinker.logs import quiet_libraries

    quiet_libraries()
    if a.child:
        print("RESULT " + json.dumps(child(a.child[0], a.child[1], int(a.child[2]), a.tokens)))
        return
    from codethinker.training.bootstrap import build_tiny_model

    batches = sorted(int(x) for x in a.batches.split(","))
    res: dict = {"tokens": a.tokens, "hidden": a.hidden, "runs": [], "fits": {}, "at": {}}
    with tempfile.TemporaryDirectory() as tmp:
        shape = {"hidden_size": a.hidden, "num_attention_heads": 1, "num_key_value_heads": 1,
                 "num_hidden_layers": 1, "intermediate_size": 2 * a.hidden}  # fmt: skip
        model = build_tiny_model(Path(tmp) / "m", a.tokenizer, seed=0, **shape)
        res["vocab"] = json.loads((model / "config.json").read_text())["vocab_size"]
        for loss in ("fused", "logits"):
            done: list[tuple[int, float]] = []
            for b in batches:
                if loss == "logits" and len(done) >= 2:  # it holds batch x tokens x vocabulary logits: a line
                    at_0, per_row = fit(done)
                    if at_0 + per_row * b > a.max_gib:
                        continue
                cmd = [sys.executable, __file__, "--tokens", str(a.tokens), "--child", str(model), loss, str(b)]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                run = json.loads(out.split("RESULT ", 1)[1])
                res["runs"].append(run)
                done.append((b, run["peak_gib"]))
                print(json.dumps(run), flush=True)
            f = res["fits"][loss] = dict(zip(("gib_at_0", "gib_per_row"), fit(done), strict=True))
            for b in batches:
                measured = [gib for x, gib in done if x == b]
                res["at"].setdefault(str(b), {})[loss] = (
                    {"peak_gib": measured[0]} if measured
                    else {"peak_gib": round(f["gib_at_0"] + f["gib_per_row"] * b, 2), "estimated": True}
                )  # fmt: skip
    for row in res["at"].values():
        row["ratio"] = round(row["logits"]["peak_gib"] / row["fused"]["peak_gib"], 1)
    print(json.dumps(res["at"], indent=1))
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
