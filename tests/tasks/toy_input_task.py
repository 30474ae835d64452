"""A third task written only against the task contract (:mod:`codethinker.tasks.base`): CRUXEval-style input
prediction. Nothing in the trainer, the evaluator or the config knows it; params.yaml would pick it as
``grpo.task: tests.tasks.toy_input_task:InputPrediction``.

Rows: a JSONL of ``{"id", "code", "input", "output", "split"}`` (``input`` and ``output`` Python literals).
The answer is ``[ANSWER]f(<input>)[/ANSWER]``; its arguments must be literals (read on the trusted side with
``ast.literal_eval``), the function runs on them in the project's sandbox, and its plain returned value is
compared here with the expected output, which never enters the sandbox.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codethinker.rewards.score import Score
from codethinker.tasks.base import Judged, Row

ANSWER_OPEN, ANSWER_CLOSE = "[ANSWER]", "[/ANSWER]"


@dataclass(frozen=True)
class InputSpec:
    kind: str = "input_match"
    format: str = "input"
    stop: tuple[str, ...] = (ANSWER_CLOSE,)
    blocks: bool = False
    block_stop: tuple[str, ...] = ()

    def kwargs(self) -> dict[str, Any]:
        return {"reward": self.kind}


def literal_args(text: str) -> tuple | None:
    """The literal arguments of the call ``f(...)`` in the last answer group, or None."""
    from codethinker.evaluation.input_prediction import predicted_args

    args = predicted_args(text, "f")
    if args is None:
        return None
    try:
        value = ast.literal_eval(f"({args},)")
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, tuple) else None


class InputPrediction:
    name = "tests.tasks.toy_input_task:InputPrediction"
    rewards = ("input_match",)
    settings = ()
    section = "grpo"

    def reward_spec(self, reward: str, settings: Mapping[str, Any]) -> InputSpec:
        if reward not in self.rewards:
            raise ValueError(f"grpo.reward must be input_match, got {reward!r}")
        return InputSpec()

    def rows(self, path: str | Path, split: str) -> list[Row]:
        out = []
        for n, line in enumerate(Path(path).read_text().splitlines(), 1):
            rec = json.loads(line)
            if not {"id", "code", "input", "output", "split"} <= rec.keys():
                raise ValueError(f"{path}:{n}: a row needs id, code, input, output and split")
            if rec["split"] == split:
                truth = json.dumps({k: rec[k] for k in ("code", "input", "output")})
                out.append({"id": rec["id"], "source": "toy", "heldout": split, "prompt": None, "truth": truth})
        return out

    def prompt(self, row: Row, spec: InputSpec) -> list[dict[str, str]]:
        t = json.loads(row["truth"])
        ask = (
            f"```python\n{t['code']}\nassert f(??) == {t['output']}\n```\nAnswer as {ANSWER_OPEN}f(...){ANSWER_CLOSE}."
        )
        return [{"role": "user", "content": ask}]

    def budget(self, model: str | Path, rows: Sequence[Row], spec: InputSpec, thoughts: bool) -> int:
        longest = max((len(json.loads(r["truth"])["input"]) for r in rows), default=0)
        return 16 + 2 * longest  # a character per token at worst, and the tags

    def score(self, spec: InputSpec, texts: Sequence[str], truths: Sequence[str]) -> list[Judged]:
        import codethinker.contra.values  # noqa: F401  (registers the sandbox's "call" runner)
        from codethinker.sandbox import Job, Sandbox, SandboxConfig

        cases = [json.loads(t) for t in truths]
        args = [literal_args(text) for text in texts]
        pairs = enumerate(zip(cases, args, strict=True))
        jobs = {i: Job(c["code"], args=a, entry_def=True) for i, (c, a) in pairs if a is not None}
        results: dict[int, Any] = {}
        if jobs:
            with Sandbox(SandboxConfig(timeout_s=2.0, workers=1)) as sb:
                results = dict(zip(jobs, sb.map(list(jobs.values())), strict=True))
        out = []
        for i, case in enumerate(cases):
            r = results.get(i)
            right = r is not None and r.status == "ok" and r.value == ast.literal_eval(case["output"])
            fmt = int(args[i] is not None)
            out.append(
                Judged(Score(fmt, 0.0, 2.0 * right, 2.0 * right, 0.0, int(right)), {"ran": float(r is not None)})
            )
        return out

    def prefix_scorer(self, spec: InputSpec) -> None:
        return None

    def verl_data(self, path: str | Path, out_dir: Path, spec: InputSpec) -> Path:
        import pandas as pd

        records = [
            {
                "data_source": "toy_input",
                "prompt": self.prompt(r, spec),
                "reward_model": {"style": "rule", "ground_truth": r["truth"]},
                "extra_info": {"id": r["id"], "task": self.name, "reward": spec.kind},
            }
            for r in self.rows(path, "train")
        ]
        out = Path(out_dir) / "toy_input.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(records).to_parquet(out, index=False)
        return out
