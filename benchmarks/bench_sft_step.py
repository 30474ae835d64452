"""SFT steps with TRL's fused LM head (``sft.loss: fused``) vs the model's logits (``logits``), one run.

    python benchmarks/bench_sft_step.py [--model models/base] [--data data/contra_sft/sft.jsonl]
        [--steps 60] [--repeats 2]

Each try is :func:`run_sft` with the default profile's settings from params.yaml and ``max_steps`` (the
curriculum's first steps: copy rows), the two losses alternating, in a fresh interpreter each. Reported per
loss: seconds per optimizer step (the trainer's loop, dataset preparation out), tokens per second, and the
first steps' losses (the same quantity, so they agree to float rounding). Not a test: compare the ratios.
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


def child(model: str, data: str, steps: int, loss: str) -> dict:
    from codethinker.config import load_config
    from codethinker.config.sft import SFTConfig
    from codethinker.training.sft import run_sft

    p = dataclasses.replace(load_config(SFTConfig).params, max_steps=steps, loss=loss, save_steps=10**6)
    with tempfile.TemporaryDirectory() as out:
        m = run_sft(model, data, Path(out), p)
        losses = [float(r.split(",")[1]) for r in (Path(out) / "train_log.csv").read_text().splitlines()[1:6]]
    return {
        "s_per_step": m["tokens"] / m["tokens_per_s"] / m["steps"],
        "tokens_per_s": m["tokens_per_s"],
        "first_losses": losses,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/base")
    ap.add_argument("--data", default="data/contra_sft/sft.jsonl")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--child", choices=["fused", "logits"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print("RESULT " + json.dumps(child(a.model, a.data, a.steps, a.child)))
        return
    runs: dict[str, list[dict]] = {"fused": [], "logits": []}
    for _ in range(a.repeats):
        for loss in runs:
            args = ["--child", loss, "--model", a.model, "--data", a.data, "--steps", str(a.steps)]
            cmd = [sys.executable, __file__, *args]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            runs[loss].append(json.loads(out.split("RESULT ", 1)[1]))
            print(loss, runs[loss][-1], flush=True)
    med = {k: statistics.median(r["s_per_step"] for r in v) for k, v in runs.items()}
    print(
        f"s/step (median of {a.repeats}): fused {med['fused']:.3f}, logits {med['logits']:.3f}, "
        f"ratio {med['fused'] / med['logits']:.2f}x"
    )


if __name__ == "__main__":
    main()
