"""The padding share of SFT's micro-batches (padded tokens / all tokens), and padding-free steps against padded ones.

    python benchmarks/bench_sft_padding.py [--model models/base] [--data data/contra_sft/sft.jsonl]
        [--profile default] [--time STEPS] [--repeats 2]

The rows, their order and the micro-batches are the profile's SFT run (params.yaml ``sft``), made by
:func:`codethinker.training.sft.run_sft`'s own functions (the rows that fit, the curriculum); a row's length is
its chat-template text in tokens, what TRL's collator pads (checked against TRL's tokenization of a sample). A
curriculum is read in order, ``batch_size x processes`` rows a micro-batch; without one the trainer's
length-grouped sampler is drawn with the run's seed. Each micro-batch is padded to its longest row (TRL's
collator on a CPU). Reported: the share over the whole run, per phase (copy rows, traces) and the micro-batches'
median and 90th percentile. ``--time STEPS``: that many steps of the run with ``sft.padding_free`` off and on,
alternating, a fresh interpreter each: seconds per step and the first losses (the same quantity). Not a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def params(profile: str):
    from codethinker.config import load_config
    from codethinker.config.sft import SFTConfig

    return load_config(SFTConfig, ROOT / "params.yaml", profile=profile).params


def micro_batches(model: str, data: str, p) -> tuple[list[list[int]], list[str], int]:
    """(the run's micro-batches as row lengths in tokens, each batch's phase, rows checked against TRL)."""
    import torch
    from transformers.trainer_pt_utils import LengthGroupedSampler

    from codethinker.training.sft import _row_chars, fitting_rows, load_sft_rows, load_tokenizer, training_order

    tok = load_tokenizer(model)
    n_chars = _row_chars(tok, p.max_length)
    kept, lengths, _ = fitting_rows(load_sft_rows(data), n_chars, p)
    train_rows, copies, _ = training_order(kept, lengths, n_chars, p)
    keys = [json.dumps(r, sort_keys=True) for r in train_rows]
    unique = list(dict.fromkeys(keys))
    by_key = dict(zip(unique, [json.loads(k) for k in unique], strict=True))
    texts = [tok.apply_chat_template(by_key[k]["prompt"] + by_key[k]["completion"], tokenize=False) for k in unique]
    size = dict(zip(unique, map(len, tok(texts, add_special_tokens=False).input_ids), strict=True))
    checked = check_against_trl(model, tok, [by_key[k] for k in unique[:64]], [size[k] for k in unique[:64]], p)
    copy_keys = {json.dumps(c, sort_keys=True) for c in copies}
    if copies:  # a curriculum: in order
        order = list(range(len(keys)))
        step = p.step_rows
    else:  # the trainer's sampler (one epoch drawn with the seed), batch_size rows a micro-batch
        torch.manual_seed(p.seed)
        order = list(LengthGroupedSampler(p.batch_size * p.grad_accum, lengths=[size[k] for k in keys]))
        step = p.batch_size
    batches = [order[i : i + step] for i in range(0, len(order) - step + 1, step)]
    phase = ["copy" if keys[b[0]] in copy_keys else "trace" for b in batches]
    return [[size[keys[i]] for i in b] for b in batches], phase, checked


def check_against_trl(model: str, tok, rows: list[dict], sizes: list[int], p) -> int:
    """TRL's own tokenization of ``rows`` (the trainer's prepared dataset) has the lengths counted here."""
    from datasets import Dataset

    from codethinker.training.sft import make_sft_trainer, sft_config

    with tempfile.TemporaryDirectory() as ck:
        q = dataclasses.replace(p, processes=1)
        trainer = make_sft_trainer(model, tok, Dataset.from_list(rows), sft_config(Path(ck), q, len(rows), True), q)
        trl = [len(x) for x in trainer.train_dataset["input_ids"]]
    if trl != sizes:
        raise SystemExit(
            f"row lengths differ from TRL's: {sum(a != b for a, b in zip(trl, sizes, strict=False))} of {len(rows)}"
        )
    return len(rows)


def shares(batches: list[list[int]]) -> dict:
    padded = [max(b) * len(b) - sum(b) for b in batches]
    every = [max(b) * len(b) for b in batches]
    per = sorted(x / y for x, y in zip(padded, every, strict=True))
    return {
        "micro_batches": len(batches),
        "tokens": sum(sum(b) for b in batches),
        "padded_tokens": sum(padded),
        "padding_share": round(sum(padded) / sum(every), 4),
        "median_batch_share": round(statistics.median(per), 4),
        "p90_batch_share": round(per[int(0.9 * (len(per) - 1))], 4),
    }


def child(model: str, data: str, profile: str, steps: int, padding_free: bool) -> dict:
    from codethinker.training.sft import run_sft

    p = dataclasses.replace(params(profile), max_steps=steps, padding_free=padding_free, save_steps=10**6)
    with tempfile.TemporaryDirectory() as out:
        m = run_sft(model, data, Path(out), p)
        losses = [float(r.split(",")[1]) for r in (Path(out) / "train_log.csv").read_text().splitlines()[1:6]]
    return {"s_per_step": m["tokens"] / m["tokens_per_s"] / m["steps"], "tokens_per_s": m["tokens_per_s"],
            "first_losses": losses}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/base")
    ap.add_argument("--data", default="data/contra_sft/sft.jsonl")
    ap.add_argument("--profile", default="default")
    ap.add_argument("--time", type=int, default=0, metavar="STEPS", help="time STEPS steps padded and padding-free")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--child", choices=["padded", "free"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    from codethinker.logs import quiet_libraries

    quiet_libraries()
    if a.child:
        print("RESULT " + json.dumps(child(a.model, a.data, a.profile, a.time, a.child == "free")))
        return
    p = params(a.profile)
    batches, phase, checked = micro_batches(a.model, a.data, p)
    res = {"profile": a.profile, "rows_per_micro_batch": p.step_rows, "checked_against_trl": checked,
           "run": shares(batches)}  # fmt: skip
    for name in sorted(set(phase)):
        res[name] = shares([b for b, ph in zip(batches, phase, strict=True) if ph == name])
    print(json.dumps(res, indent=1), flush=True)
    if not a.time:
        return
    runs: dict[str, list[dict]] = {"padded": [], "free": []}
    for _ in range(a.repeats):
        for kind in runs:
            cmd = [sys.executable, __file__, "--child", kind, "--model", a.model, "--data", a.data,
                   "--profile", a.profile, "--time", str(a.time)]  # fmt: skip
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            runs[kind].append(json.loads(out.split("RESULT ", 1)[1]))
            print(kind, runs[kind][-1], flush=True)
    med = {k: statistics.median(r["s_per_step"] for r in v) for k, v in runs.items()}
    print(f"s/step (median of {a.repeats}): padded {med['padded']:.3f}, padding-free {med['free']:.3f}, "
          f"ratio {med['padded'] / med['free']:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
