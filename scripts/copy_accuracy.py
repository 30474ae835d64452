"""Where a policy's ConTra traces go wrong: teacher-forced next-token accuracy by part of the trace.

    python scripts/copy_accuracy.py models/sft/merged data/contra_sft/grpo_eval.parquet --source synth -n 100

Each held-out row's ground-truth trace (rendered from its Flow, empty THOUGHTs as the default profile's
SFT rows) follows its prompt; the model predicts every trace token from the true text before it, so an
error here is the model's alone, not one carried over from an earlier mistake. Tokens are grouped by
the part of the trace they sit in (``code``: the copied code lines; ``locals``: the LOCALS dicts;
``ret_input``: the call in RETURN, a copy of the prompt's input; ``ret_output``: the value after ``==``;
``other``: tags and layout) and by kind (``digit``, ``alpha``, ``punct``). Also printed: the rows whose
every code token, and whose every RETURN-input token, is predicted right. Greedy decoding needs both.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PARTS = (
    ("code", re.compile(r"\[CODE\]\n(.*?)\[/CODE\]", re.S)),
    ("locals", re.compile(r"\[LOCALS\]\n(.*?)\n\[/LOCALS\]", re.S)),
    ("ret_input", re.compile(r"assert (.*) == .*\n\[/RETURN\]")),
    ("ret_output", re.compile(r"assert .* == (.*)\n\[/RETURN\]")),
)


def char_parts(trace: str) -> list[str]:
    """The part of the trace each character belongs to.

    >>> char_parts("[CODE]\\nx\\n[/CODE]\\n")[7]
    'code'
    """
    part = ["other"] * len(trace)
    for name, pattern in PARTS:
        for m in pattern.finditer(trace):
            part[m.start(1) : m.end(1)] = [name] * (m.end(1) - m.start(1))
    return part


def token_kind(token: str) -> str:
    text = token.replace("Ġ", "").strip()
    return "digit" if text.isdigit() else "alpha" if text.isalpha() else "punct"


def score_row(model, tok, prompt: str, trace: str, tally: dict, whole: collections.Counter) -> None:
    import torch

    enc = tok(prompt + trace, return_offsets_mapping=True, add_special_tokens=False)
    with torch.no_grad():
        pred = model(torch.tensor([enc.input_ids])).logits[0].argmax(-1).tolist()
    part, base, wrong = char_parts(trace), len(prompt), collections.Counter()
    for t in range(len(enc.input_ids) - 1):
        start = enc.offset_mapping[t + 1][0] - base
        if start < 0 or start >= len(part):
            continue
        ok = pred[t] == enc.input_ids[t + 1]
        kind = token_kind(tok.convert_ids_to_tokens(enc.input_ids[t + 1]))
        for key in (part[start], f"{part[start]}/{kind}"):
            tally[key][0] += ok
            tally[key][1] += 1
        wrong[part[start]] += not ok
    whole["code"] += wrong["code"] == 0
    whole["ret_input"] += wrong["ret_input"] == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a causal LM folder with its tokenizer (e.g. models/sft/merged)")
    ap.add_argument("data", help="GRPO rows with a 'truth' Flow (e.g. data/contra_sft/grpo_eval.parquet)")
    ap.add_argument("--source", default="synth", help="rows of this source (synth, leetcode)")
    ap.add_argument("-n", type=int, default=100, help="rows scored")
    ap.add_argument("--prompt", default="bare", help="prompt style the model was trained on (bare, instruct)")
    args = ap.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codethinker.contra.render import render_prompt, render_trace
    from codethinker.contra.tracer import Flow
    from codethinker.training.grpo_data import load_grpo_rows

    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    rows, _ = load_grpo_rows(Path(args.data))
    rows = [r for r in rows if r["source"] == args.source][: args.n]
    tally: dict = collections.defaultdict(lambda: [0, 0])
    whole: collections.Counter = collections.Counter()
    for r in rows:
        flow = Flow.from_json(r["truth"])
        prompt = tok.apply_chat_template(render_prompt(flow, args.prompt), tokenize=False, add_generation_prompt=True)
        score_row(model, tok, prompt, render_trace(flow), tally, whole)
    print(f"{args.model}: {len(rows)} {args.source} rows, teacher-forced next-token accuracy")
    for key, (right, n) in sorted(tally.items()):
        print(f"  {key:18} {right / n:.3f}  ({n} tokens)")
    print(f"  rows with every code token right: {whole['code']}; every RETURN-input token: {whole['ret_input']}")


if __name__ == "__main__":
    main()
