"""The bare prompt's last lines, compared at a fixed SFT budget (docs/training.md, "The call's frame in the prompt").

    python scripts/prompt_experiment.py RUN OUT --mode frame        # SFT from RUN's base model, then greedy scoring
    python scripts/prompt_experiment.py RUN OUT --mode input --model RUN/models/sft/merged   # score a model only

``RUN``: a workspace after ``make run`` whose SFT rows and held-out prompts end with the call alone
(``Input: f(x)``: commits before 1ed33bc). Every user turn of its ``data/contra_sft/sft.jsonl`` and of the
held-out prompts (``grpo_eval.parquet``: the first 100 generated programs and 30 LeetCode functions, as
``train_eval`` takes them) is rewritten by ``--mode``: ``input`` (unchanged), ``assert`` (the call written as
``assert f(x) == ??``) or ``frame`` (the call, then its frame: ``contra.render.entry_frame``). SFT uses the
default profile's ``sft`` params (``params.yaml`` of this checkout) and ``RUN/models/base``; each held-out
answer (greedy, vLLM) is checked with ``contra.validate`` and its first failure counted. Writes
``OUT/outs.json`` (every answer with its verdict) and prints the tally.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CALL = re.compile(r"\nInput: (.*)\n$", re.S)
LISTED = re.compile(r"^\[LINENO \d+\]    ", re.M)
MODES = ("input", "assert", "frame")


def prompt_flow(text: str):
    """The code and the call of a bare prompt as a Flow (one placeholder block: the frame needs no more)."""
    from codethinker.contra.tracer import Flow

    code = LISTED.sub("", text.split("[CODE]\n", 1)[1].split("\n[/CODE]", 1)[0])
    entry, args = re.fullmatch(r"(\w+)\((.*)\)", CALL.search(text).group(1), re.S).groups()
    block = {"start": 0, "end": code.count("\n"), "weight": 1, "locals": "{}"}
    return Flow.from_dict({"entry": entry, "input": args, "code": code + "\n", "blocks": [block], "output": "None"})


def rewrite(text: str, mode: str, flow) -> str:
    """The user turn with its last line written as ``mode`` says (``flow``: the row's truth, for the frame)."""
    from codethinker.contra.render import entry_frame

    m = CALL.search(text)
    if mode == "input" or m is None:
        return text
    if mode == "assert":
        return f"{text[: m.start()]}\nassert {m.group(1)} == ??\n"
    frame = entry_frame(flow)
    return text if frame is None else f"{text}{frame}\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--mode", choices=MODES, required=True)
    ap.add_argument("--model", type=Path, help="score this model instead of training one")
    a = ap.parse_args()
    from codethinker.contra.tracer import Flow
    from codethinker.contra.validate import validate

    a.out.mkdir(parents=True, exist_ok=True)
    model = a.model
    if model is None:
        from codethinker.config import load_config
        from codethinker.config.sft import SFTConfig
        from codethinker.training.sft import run_sft

        data = a.out / "sft.jsonl"
        with open(a.run / "data/contra_sft/sft.jsonl") as f, open(data, "w") as g:
            for line in f:
                row = json.loads(line)
                turn = row["messages"][0]
                turn["content"] = rewrite(turn["content"], a.mode, prompt_flow(turn["content"]))
                g.write(json.dumps(row) + "\n")
        metrics = run_sft(a.run / "models/base", data, a.out / "sft", load_config(SFTConfig).params)
        print("sft", {k: metrics[k] for k in ("steps", "last_loss", "tokens", "tokens_per_s", "wall_s")}, flush=True)
        model = a.out / "sft/merged"
    from codethinker.engines.vllm import VLLMEngine
    from codethinker.tasks import get_task
    from codethinker.training.grpo_data import load_grpo_rows
    from codethinker.training.grpo_rows import with_reward_prompts
    from codethinker.training.train_eval import EvalParams, select_rows

    rows, _ = load_grpo_rows(a.run / "data/contra_sft/grpo_eval.parquet")
    spec = EvalParams().reward_spec()
    rows = with_reward_prompts(select_rows(rows, {"synth": 100, "leetcode": 30}), spec, get_task("output_prediction"))
    flows = [Flow.from_json(r["truth"]) for r in rows]
    for r, flow in zip(rows, flows, strict=True):
        r["prompt"][-1]["content"] = rewrite(r["prompt"][-1]["content"], a.mode, flow)
    eng = VLLMEngine(str(model), max_model_len=2048, dtype="float32", max_num_seqs=130)
    prompts = [eng.apply_chat_template(r["prompt"]) for r in rows]
    outs = eng.continue_prefixes(prompts, 1, stop=spec.stop, max_tokens=650, temperature=0.0, seed=0)
    tally: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    dump = []
    for r, flow, comps in zip(rows, flows, outs, strict=True):
        v = validate(comps[0].text, flow)
        reason = "ok" if v.ok else v.reason
        tally[r["source"]][reason] += 1
        dump.append(
            {"source": r["source"], "prompt": r["prompt"][-1]["content"], "text": comps[0].text, "reason": reason}
        )
    (a.out / "outs.json").write_text(json.dumps(dump, indent=1))
    print({k: dict(c) for k, c in tally.items()})


if __name__ == "__main__":
    main()
