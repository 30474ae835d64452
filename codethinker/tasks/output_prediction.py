"""ConTra output prediction (the grpo stage's task): trace a program block by block and state its output.

Rows come from contra_sft's GRPO parquet in verl's schema (``prompt``, ``reward_model.ground_truth`` = the
truth Flow's JSON, ``extra_info.id``/``source``/``heldout``/``task_id``); the training and held-out rows are
separate files, so ``split`` is not read. Rewards (:mod:`codethinker.rewards.switch`): ``crm`` (CodeThinker,
the row's ConTra prompt), ``orm`` (CodeReasoner, the vanilla prompt), ``whitebox`` (ExecVerify); a
baseline's prompt is rendered from the row's truth. An answer may take 1.25 x the longest ground-truth trace
of the rows (with the template teacher's thoughts, or empty ones for a policy trained without).

>>> task = OutputPrediction()
>>> spec = task.reward_spec("orm", {})
>>> (spec.format, spec.stop, task.prefix_scorer(spec))
('vanilla', ['[/ANSWER]'], None)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from codethinker.contra.tracer import Flow
from codethinker.rewards.switch import REWARDS, RewardSpec, reward_spec
from codethinker.tasks.base import Judged, Row

__all__ = ["OutputPrediction", "plain", "truth_token_budget"]


def plain(x: Any) -> Any:
    """numpy arrays / pyarrow structs from parquet -> plain lists and dicts."""
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    return x


def truth_token_budget(tok: Any, rows: Sequence[Row], thoughts: bool = True, margin: float = 1.25) -> int:
    """``margin`` x the tokens of the longest ground-truth trace of ``rows`` (with the template
    teacher's thoughts, or with empty ones for a policy trained on ``contra_sft.teacher: none``)."""
    from codethinker.contra.render import render_trace
    from codethinker.data.sft import template_trace

    render = template_trace if thoughts else render_trace
    longest = max((len(tok(render(Flow.from_json(r["truth"]))).input_ids) for r in rows), default=0)
    return max(16, int(longest * margin) + 8)  # + the closing tags' slack


class OutputPrediction:
    name = "output_prediction"
    rewards = REWARDS
    settings = ("crm", "whitebox")
    section = "grpo"

    def reward_spec(self, reward: str, settings: Mapping[str, Any]) -> RewardSpec:
        return reward_spec(reward, settings.get("crm"), settings.get("whitebox"))

    def rows(self, path: str | Path, split: str = "train") -> list[Row]:
        import pandas as pd

        rows = []
        for rec in pd.read_parquet(path).to_dict("records"):
            rec = plain(rec)
            extra = rec.get("extra_info") or {}
            rows.append(
                {
                    "id": extra.get("id", str(len(rows))),
                    "source": extra.get("source", "leetcode"),
                    **{k: extra.get(k) or "" for k in ("heldout", "task_id")},
                    "prompt": rec["prompt"],
                    "truth": rec["reward_model"]["ground_truth"],
                }
            )
        return rows

    def prompt(self, row: Row, spec: RewardSpec) -> list[dict[str, str]]:
        if spec.kind == "crm":  # the row's ConTra prompt, in the style contra_sft wrote it
            return row["prompt"]
        return spec.prompt(Flow.from_json(row["truth"]))

    def budget(self, model: str | Path, rows: Sequence[Row], spec: RewardSpec, thoughts: bool) -> int:
        from transformers import AutoTokenizer

        return truth_token_budget(AutoTokenizer.from_pretrained(str(model)), rows, thoughts)

    def score(self, spec: RewardSpec, texts: Sequence[str], truths: Sequence[str]) -> list[Judged]:
        if len(texts) != len(truths):
            raise ValueError(f"{len(texts)} answers but {len(truths)} truths")
        flows = {truth: Flow.from_json(truth) for truth in set(truths)}  # a prompt's samples share its truth
        return [Judged(spec.score(t, flows[truth])) for t, truth in zip(texts, truths, strict=True)]

    def prefix_scorer(self, spec: RewardSpec) -> None:
        return None  # the rollout's ConTra PRM on the truth's Flow

    def verl_data(self, path: str | Path, out_dir: Path, spec: RewardSpec) -> Path:
        """``path`` itself for ``crm``; for a baseline a copy whose ``prompt`` is the reward's, rendered from
        each row's truth, and whose ``extra_info`` carries ``reward`` and ``prompt_format``."""
        if spec.kind == "crm":
            return Path(path)
        import pandas as pd

        from codethinker.data.io import atomic_write

        records = []
        for rec in pd.read_parquet(path).to_dict("records"):
            rec = plain(rec)
            rec["prompt"] = spec.prompt(Flow.from_json(rec["reward_model"]["ground_truth"]))
            rec["extra_info"] = {**(rec.get("extra_info") or {}), "reward": spec.kind, "prompt_format": spec.format}
            records.append(rec)
        out = Path(out_dir) / f"{Path(path).stem}.{spec.kind}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(out, "wb") as fh:
            pd.DataFrame(records).to_parquet(fh, index=False)
        return out
