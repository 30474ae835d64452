"""vLLM's CPU build in the caller's process (``in_process``, the default there) vs its own engine processes, one run.

    python benchmarks/bench_engine_start.py [--model models/sft/merged] [--data data/contra_sft/grpo_eval.parquet]
        [--prompts 400] [--max-tokens 200] [--repeats 2]

Each try is a fresh interpreter (what a stage is): build the engine, write greedy answers to the held-out
prompts (train_eval's), close it; the two modes alternate. Reported per mode: seconds to start (vLLM's import
included), to generate, to close, the whole child process, and the answers' hash (the same in both modes).
Not a test: compare the ratios.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def child(model: str, data: str, prompts: int, max_tokens: int, in_process: bool) -> dict:
    from codethinker import engines
    from codethinker.training.grpo_data import load_grpo_rows

    rows, _ = load_grpo_rows(data)
    t0 = time.perf_counter()
    eng = engines.open_engine(model, "vllm", seed=0, max_model_len=4096, max_num_seqs=256, in_process=in_process)
    t1 = time.perf_counter()
    texts = [eng.apply_chat_template(r["prompt"]) for r in rows[:prompts]]
    out = eng.continue_prefixes(texts, 1, stop=[], max_tokens=max_tokens, temperature=0)
    t2 = time.perf_counter()
    eng.close()
    t3 = time.perf_counter()
    answers = "\0".join(c.text for row in out for c in row)
    return {
        "start_s": round(t1 - t0, 2),
        "generate_s": round(t2 - t1, 2),
        "close_s": round(t3 - t2, 2),
        "tokens": sum(c.n_tokens for row in out for c in row),
        "answers_sha1": hashlib.sha1(answers.encode()).hexdigest()[:12],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/sft/merged")
    ap.add_argument("--data", default="data/contra_sft/grpo_eval.parquet")
    ap.add_argument("--prompts", type=int, default=400)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--child", choices=["in_process", "processes"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print("RESULT " + json.dumps(child(a.model, a.data, a.prompts, a.max_tokens, a.child == "in_process")))
        return
    runs: dict[str, list[dict]] = {"in_process": [], "processes": []}
    for _ in range(a.repeats):
        for mode in runs:
            cmd = [sys.executable, __file__, "--child", mode, "--model", a.model, "--data", a.data]
            cmd += ["--prompts", str(a.prompts), "--max-tokens", str(a.max_tokens)]
            t = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True)
            line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
            runs[mode].append({**json.loads(line[7:]), "process_s": round(time.perf_counter() - t, 2)})
            print(mode, runs[mode][-1], file=sys.stderr, flush=True)
    mean = {
        m: {k: sum(r[k] for r in rs) / len(rs) for k in ("start_s", "generate_s", "close_s", "process_s")}
        for m, rs in runs.items()
    }
    ratios = {
        k: round(mean["processes"][k] / max(mean["in_process"][k], 1e-9), 2)
        for k in ("start_s", "generate_s", "process_s")
    }
    same = len({r["answers_sha1"] for rs in runs.values() for r in rs}) == 1
    print(json.dumps({"runs": runs, "mean": mean, "processes_over_in_process": ratios, "same_answers": same}, indent=1))


if __name__ == "__main__":
    main()
