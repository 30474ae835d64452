"""The code-generation policy on the held-out problems (stage ``codegen_eval``, docs/codegen.md "GRPO
recipes"): pass@1, tokens per answer, the format-valid rate and, for ReflexiCoder, the reflection cycles and
how the first draft and the final revision fare (:func:`~codethinker.rewards.reflexicoder.draft_outcomes`:
``first_pass1``, ``fail_then_pass``, ``pass_then_pass``, ``pass_then_fail``; the reward pays a fixed wrong
draft more than a right one kept right, so these show whether a policy sandbags its first draft).

Each model (``after_sft``, ``after_grpo``) answers every held-out problem of codegen_data (``split``
heldout) ``samples`` times in the prompt format of the reward GRPO trained with (``grpo.reward``; one
fenced block, or ReflexiCoder's reflect-and-revise layout); every answer of a model is judged in one sandbox.
A problem's pass@1 is the share of its answers whose program passes every test (for ReflexiCoder: the last
answer's program), the unbiased estimate for ``samples`` >= 1; each metric is reported as the mean over
problems with its 95% bootstrap interval. ``cg_grpo`` / ``cg_grpo_ungated`` policies are scored with the
outcome reward (their reward model is a training signal, not a measure).

>>> run_codegen_eval({"after_grpo": "models/grpo/merged"}, problems, CodegenEvalParams())  # doctest: +SKIP
{'reward_kind': 'codegen_outcome', ..., 'after_grpo': {'pass1': 0.0, 'tokens': 212.0, ...}}
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codethinker.tasks.codegen import read_problems, reference_budget

__all__ = [
    "CODEGEN_METRICS",
    "CodegenEvalParams",
    "read_problems",
    "reference_budget",
    "run_codegen_eval",
    "score_answers",
]

CODEGEN_METRICS = ("pass1", "fmt_rate", "reward", "pass_rate", "tokens", "truncated")


@dataclass
class CodegenEvalParams:
    max_problems: int | None = field(default=None, metadata={"help": "first N held-out problems (None: all)"})
    max_tokens: int | str = field(
        default="auto",
        metadata={"help": "response limit; auto: 1.25 x the longest reference solution (x 2 for reflexicoder)"},
    )
    temperature: float = field(default=0.0, metadata={"help": "0: greedy"})
    samples: int = field(default=1, metadata={"help": "answers per problem (pass@1 is their mean)"})
    engine: str = field(default="auto", metadata={"help": "vllm | hf | auto"})
    max_model_len: int = field(default=4096, metadata={"help": "vLLM context"})
    kv_cache_gib: float | str | None = field(
        default="auto", metadata={"help": "vLLM CPU build's KV cache in GiB (as train_eval.kv_cache_gib)"}
    )
    reward: str = field(
        default="codegen_outcome", metadata={"help": "the reward GRPO trained with (grpo.reward when task codegen)"}
    )
    reflexicoder: dict[str, Any] = field(default_factory=dict, metadata={"help": "ReflexiCoder's coefficients"})
    judge: dict[str, Any] = field(default_factory=dict, metadata={"help": "the judge's limits (codegen.*)"})
    seed: int = field(default=0, metadata={"help": "sampling seed"})

    def __post_init__(self) -> None:
        from codethinker.engines.kv_cache import parse_kv_setting

        parse_kv_setting(self.kv_cache_gib, "codegen_eval.kv_cache_gib")
        self.spec()

    def spec(self) -> Any:
        """The reward the answers are scored with: ReflexiCoder's for a ReflexiCoder policy, else the outcome
        reward in the prompt format the policy trained in (ReCode's for CG-GRPO: its reward model trains, it
        does not measure)."""
        from codethinker.rewards.codegen_switch import codegen_spec

        trained = codegen_spec(self.reward, self.reflexicoder, self.judge)
        kind = {"reflexion": "reflexicoder", "recode": "recode_outcome"}.get(trained.format, "codegen_outcome")
        return codegen_spec(kind, self.reflexicoder, self.judge)

    def kv_params(self) -> Any:
        from codethinker.engines.kv_cache import KVParamNames

        names = ("codegen_eval.max_problems", "codegen_eval.max_model_len")
        return KVParamNames("codegen_eval.kv_cache_gib", names, "codegen_eval.max_model_len")


def score_answers(spec: Any, problems: list[Any], answers: list[list[Any]]) -> list[dict[str, float]]:
    """Per problem, the mean over its answers (engine :class:`~codethinker.engines.base.Completion`) of
    :data:`CODEGEN_METRICS` (and for ReflexiCoder ``cycles`` and the draft outcomes,
    :data:`~codethinker.rewards.reflexicoder.DRAFT_METRICS`); every answer judged in one sandbox."""
    from codethinker.rewards.reflexicoder import DRAFT_METRICS, draft_outcomes

    flat = [(q, c) for q, comps in zip(problems, answers, strict=True) for c in comps]
    scored = iter(spec.score_batch([c.text for _, c in flat], [json.dumps(q.to_json()) for q, _ in flat]))
    out = []
    for comps in answers:
        vals: dict[str, float] = dict.fromkeys(CODEGEN_METRICS, 0.0)
        if spec.format == "reflexion":
            vals.update(dict.fromkeys(("cycles", *DRAFT_METRICS), 0.0))
        for c in comps:
            s = next(scored)
            vals["pass1"] += s.score.answer_ok
            vals["fmt_rate"] += s.score.fmt
            vals["reward"] += s.score.reward
            vals["pass_rate"] += float(s.score.pass_rate or 0.0)
            vals["tokens"] += c.n_tokens
            vals["truncated"] += float(c.finish_reason == "length")
            if "cycles" in vals:
                vals["cycles"] += float(s.cycles or 0)
                for k, v in draft_outcomes(s.pass_rates).items():
                    vals[k] += v
        out.append({k: v / max(len(comps), 1) for k, v in vals.items()})
    return out


def _summary(per_problem: list[dict[str, float]], seed: int) -> dict[str, float]:
    from codethinker.evaluation.stats import bootstrap_ci

    out: dict[str, float] = {"n": len(per_problem)}
    for k in per_problem[0] if per_problem else ():
        out.update(bootstrap_ci([x[k] for x in per_problem], seed=seed).as_dict(k))
    return out


def run_codegen_eval(models: dict[str, str | Path], problems: list[Any], p: CodegenEvalParams) -> dict[str, Any]:
    """Evaluate each named model on ``problems`` (a missing local model folder is reported, not fatal)."""
    from codethinker.training.train_eval import open_eval_engine

    spec = p.spec()
    problems = problems[: p.max_problems] if p.max_problems else problems
    if not problems:
        raise ValueError("codegen_eval: no held-out problems (codegen.heldout is 0, or codegen_data not run)")
    local = ("models/", "./", "/")
    present = {n: m for n, m in models.items() if Path(m).exists() or not str(m).startswith(local)}
    limit = p.max_tokens
    if limit == "auto":
        limit = reference_budget(next(iter(present.values())), problems, spec.format) if present else 1024
    out: dict[str, Any] = {
        "task": "codegen",
        "reward_kind": p.reward,
        "scored_with": spec.kind,
        "prompt_format": spec.format,
        "problems": len(problems),
        "max_tokens": int(limit),
    }
    prompts = [spec.prompt(q) for q in problems]
    from tqdm.auto import tqdm

    bar = tqdm(models.items(), desc="codegen_eval", unit="model", file=sys.stderr)
    for name, path in bar:
        bar.set_postfix_str(name)
        if name not in present:
            out[name] = {"missing": 1.0}
            continue
        t0 = time.time()
        eng = open_eval_engine(path, p, len(problems) * p.samples)
        try:
            texts = [eng.apply_chat_template(m) for m in prompts]
            answers = eng.continue_prefixes(
                texts, p.samples, stop=spec.stop, max_tokens=int(limit), temperature=p.temperature, seed=p.seed
            )
        finally:
            if hasattr(eng, "close"):
                eng.close()
            del eng
        per_problem = score_answers(spec, problems, answers)
        out[name] = {**_summary(per_problem, p.seed), "wall_s": round(time.time() - t0, 1)}
    return out
