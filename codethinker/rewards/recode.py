"""ReCode's CG-GRPO reward (docs/recode.md): format + outcome + a process reward gated on the outcome.

    R = R_fmt + R_out + [R_out = 1] * R_proc          (cg_score, gated=True: CG-GRPO)
    R = R_fmt + R_out + R_proc                         (gated=False: the paper's "direct addition" ablation)

* ``R_fmt``: 1.0 when the completion is ``<think>...</think>`` then ``<answer>...</answer>`` and nothing
  else, the answer holds exactly one fenced Python block that parses and defines the entry point
  (:func:`recode_format`; the answer's check is codegen's :func:`~codethinker.codegen.answer.check_format`),
  else 0.0 (the seeds give no other value).
* ``R_out``: 1.0 when the judged program (:func:`recode_program`) passes every test (codegen's
  :func:`~codethinker.rewards.codegen.outcome_score`), else 0.0.
* ``R_proc``: the CRPL reward model's Bradley-Terry logit ``s`` mapped to [0, 1] by the sigmoid
  (:func:`process_reward`). The seeds do not state the mapping. Under Bradley-Terry, ``sigmoid(s)`` is the
  probability that the response beats a reference scored 0, so it is bounded like R_out and R_fmt (a
  correct answer can never be outweighed by the process term: R_proc < 1 = R_out), and it is a function of
  the response alone, so the gate and the score of one response do not depend on its group (GRPO then
  standardizes the total reward within the group anyway).

The reward-model scores are an input: the functions are pure and the gate is testable without a model;
:class:`ProcessRewardModel` loads the trained model (``models/reward_model``) and gives the scores. The
:class:`~codethinker.rewards.score.Score` parts: ``fmt`` (R_fmt), ``r_res`` (R_out), ``r_proc`` (the R_proc
paid: 0.0 when gated off), ``reward`` (R), ``answer_ok`` (R_out), ``pass_rate``, ``reason`` (the format's
or the judgement's failure), ``rcs`` 0.0 (no ConTra trace here).

>>> from codethinker.codegen.judge import Judgement
>>> from codethinker.codegen.task import CodegenProblem
>>> p = CodegenProblem("add", 1, "Easy", "v0.2.0", "...", "", "", "Solution().add", ("assert candidate(1) == 2",))
>>> code = "class Solution:\\n    def add(self, x):\\n        return x + 1\\n"
>>> ok = f"<think>Add one.</think>\\n<answer>\\n```python\\n{code}```\\n</answer>"
>>> recode_program(ok) == code
True
>>> cg_score(ok, p, Judgement("pass", ("pass",), 1), rm_score=0.0).reward  # 1 + 1 + sigmoid(0)
2.5
>>> s = cg_score(ok, p, Judgement("fail", ("fail",), 1), rm_score=5.0)  # the gate: no R_proc for a failure
>>> s.reward, s.r_proc, s.reason
(1.0, 0.0, 'fail')
>>> cg_score(ok, p, Judgement("fail", ("fail",), 1), rm_score=0.0, gated=False).reward
1.5
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codethinker.codegen.answer import check_format, extract_program
from codethinker.codegen.crpl_edits import split_recode
from codethinker.codegen.judge import Judgement
from codethinker.codegen.task import CodegenProblem
from codethinker.rewards.codegen import outcome_score
from codethinker.rewards.score import Score

__all__ = [
    "ProcessRewardModel",
    "cg_rewards",
    "cg_score",
    "cg_scores",
    "load_classifier",
    "process_reward",
    "recode_format",
    "recode_program",
]


def recode_format(completion: str, entry_point: str) -> tuple[bool, str | None]:
    """``(True, None)`` when ``completion`` is in ReCode's format (see the module docstring), else
    ``(False, reason)``: ``no_think_answer`` (the tags), ``empty_think``, or the answer's
    :data:`~codethinker.codegen.answer.REASONS`."""
    parts = split_recode(completion)
    if parts is None:
        return False, "no_think_answer"
    if not parts[0].strip():
        return False, "empty_think"
    return check_format(parts[1], entry_point)


def recode_program(completion: str) -> str:
    """The program the judge runs: the answer's (:func:`~codethinker.codegen.answer.extract_program` of the
    ``<answer>`` part), or of the whole completion when it is not in ReCode's format ("" when none)."""
    parts = split_recode(completion)
    return extract_program(parts[1] if parts else completion)


def process_reward(rm_score: float) -> float:
    """R_proc: the sigmoid of the reward model's logit (finite; a NaN score is an error)."""
    if math.isnan(rm_score):
        raise ValueError("reward-model score is NaN")
    return 1.0 / (1.0 + math.exp(-rm_score)) if rm_score >= 0 else math.exp(rm_score) / (1.0 + math.exp(rm_score))


def cg_score(
    completion: str, problem: CodegenProblem, verdict: Judgement, rm_score: float | None, *, gated: bool = True
) -> Score:
    """The CG-GRPO reward of one completion (``gated=False``: the ungated ablation; ``rm_score`` None: no
    process term, ``R_fmt + R_out``)."""
    fmt_ok, why = recode_format(completion, problem.entry_point)
    outcome = outcome_score(completion, problem, verdict)
    r_out = outcome.r_res
    r_proc = process_reward(rm_score) if rm_score is not None and (r_out == 1.0 or not gated) else 0.0
    return Score(
        fmt=int(fmt_ok),
        r_proc=round(r_proc, 6),
        r_res=r_out,
        reward=round(float(fmt_ok) + r_out + r_proc, 6),
        rcs=0.0,
        answer_ok=outcome.answer_ok,
        reason=why or outcome.reason,
        pass_rate=outcome.pass_rate,
    )


def cg_scores(
    completions: Sequence[str],
    problems: Sequence[CodegenProblem],
    verdicts: Sequence[Judgement],
    rm_scores: Sequence[float | None],
    *,
    gated: bool = True,
) -> list[Score]:
    """:func:`cg_score` of each (completion, problem, judgement, reward-model score); ``ValueError`` when
    the lengths differ."""
    rows = zip(completions, problems, verdicts, rm_scores, strict=True)
    return [cg_score(c, p, v, s, gated=gated) for c, p, v, s in rows]


def cg_rewards(
    completions: Sequence[str],
    problems: Sequence[CodegenProblem],
    verdicts: Sequence[Judgement],
    rm_scores: Sequence[float],
    *,
    gated: bool = True,
) -> list[float]:
    """The reward of each completion (TRL's ``reward_fn`` shape)."""
    return [s.reward for s in cg_scores(completions, problems, verdicts, rm_scores, gated=gated)]


def load_classifier(path: str | Path, **kwargs: Any) -> Any:
    """A one-logit sequence classifier from ``path``. From a causal LM (the reward model's start) the
    ``score`` head is new: transformers logs that as a 12-line MISSING table on every load, so that one record
    is dropped and the expected case checked here instead; a missing weight of the body is an error. (A filter,
    not a level: transformers checks its tensor-parallel plan, and warns about it, when that logger's level is
    WARNING or above.)"""
    import logging

    from transformers import AutoModelForSequenceClassification

    report = logging.getLogger("transformers.modeling_utils")  # where transformers logs the load report
    drop = _DropLoadReport()
    report.addFilter(drop)
    try:
        net, info = AutoModelForSequenceClassification.from_pretrained(
            str(path), num_labels=1, output_loading_info=True, **kwargs
        )
    finally:
        report.removeFilter(drop)
    if body := sorted(k for k in info.get("missing_keys", ()) if not k.startswith("score.")):
        raise ValueError(f"{path}: not a checkpoint of this model, {len(body)} weights missing ({body[0]}, ...)")
    return net


class _DropLoadReport:
    """A logging filter: every record but transformers' load report."""

    def filter(self, record: Any) -> bool:
        return "LOAD REPORT" not in record.getMessage()


class ProcessRewardModel:
    """The trained CRPL reward model (a sequence-classification head, one logit): :meth:`score` gives the
    Bradley-Terry logit of each (prompt, completion), laid out by the tokenizer's chat template as in
    training (a user turn, then an assistant turn)."""

    def __init__(self, path: str | Path, *, device: str | None = None, max_length: int | None = None):
        import torch
        from transformers import AutoTokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tok = AutoTokenizer.from_pretrained(str(path))
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token
        self.model = load_classifier(path).to(self.device)
        self.model.config.pad_token_id = self.tok.pad_token_id
        self.model.eval()
        self.max_length = max_length

    def ids(self, prompt: str, completion: str) -> list[int]:
        """The token ids the model reads for one (prompt, completion)."""
        chat = [{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}]
        out: Any = self.tok.apply_chat_template(chat, tokenize=True, return_dict=True)
        ids = list(out["input_ids"])
        return ids[: self.max_length] if self.max_length else ids

    def score(self, prompts: Sequence[str], completions: Sequence[str], batch_size: int = 8) -> list[float]:
        """One logit per (prompt, completion) (``ValueError`` when the lengths differ)."""
        import torch

        rows = [self.ids(p, c) for p, c in zip(prompts, completions, strict=True)]
        out: list[float] = []
        pad = int(self.tok.pad_token_id)
        for i in range(0, len(rows), batch_size):
            batch = rows[i : i + batch_size]
            width = max(len(r) for r in batch)
            ids = torch.tensor([r + [pad] * (width - len(r)) for r in batch], device=self.device)
            mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in batch], device=self.device)
            with torch.no_grad():
                logits = self.model(input_ids=ids, attention_mask=mask).logits
            out += [float(x) for x in logits[:, 0].float().cpu()]
        return out
