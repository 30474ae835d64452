"""The code-generation rewards as a switch (the grpo_codegen stage, ``grpo_codegen.reward``; docs/codegen.md
"GRPO recipes"): each kind with its prompt, its stops, its DBS blocks and its batched score.

- ``codegen_outcome``: outcome-only GRPO, ``R = R_fmt + R_out`` (:func:`~codethinker.rewards.codegen.format_score`
  + :func:`~codethinker.rewards.codegen.outcome_score`: 0, 1 or 2); the problem's prompt (one fenced block).
- ``reflexicoder``: ReflexiCoder's composite reward (:mod:`codethinker.rewards.reflexicoder`) on every
  answer's pass rate; the problem's statement followed by :data:`~codethinker.codegen.reflexion.FORMAT_PROMPT`.
- ``cg_grpo`` / ``cg_grpo_ungated``: ReCode's CG-GRPO, ``R_fmt + R_out + [R_out = 1] R_proc`` (gated) or the
  ungated sum (:mod:`codethinker.rewards.recode`), with ``R_proc`` the sigmoid of the CRPL reward model's
  score (the ``reward_model`` stage's ``models/reward_model``); ReCode's prompt and format (``<think>`` then
  ``<answer>``, :func:`~codethinker.codegen.crpl.recode_prompt`). ``recode_outcome``: that format with
  ``R_fmt + R_out`` only (outcome-only GRPO in ReCode's format; ``codegen_eval`` scores CG-GRPO policies so).

Every kind judges all programs of a batch in ONE sandbox (:func:`~codethinker.codegen.judge.judge_programs`).
A ground truth is the problem as JSON (:meth:`CodegenProblem.to_json`), in the GRPO rows' ``truth`` and in
verl's ``reward_model.ground_truth``.

DBS block ends (:attr:`CodegenRewardSpec.block_stop`): a blank line (``\\n\\n``: the end of a reasoning
paragraph or of a group of code lines) for the one-block formats, the end of an answer (``</answer>``) for
ReflexiCoder. A prefix is scored without execution (a partial program has no tests): 1.0 while it is a
prefix of a well-formed response (:func:`code_prefix_score`, :func:`reflexion_prefix_score`), else 0.0.

>>> from codethinker.codegen.task import CodegenProblem
>>> p = CodegenProblem("add", 1, "Easy", "v0.2.0", "Add one.", "", "", "Solution().add", ("assert candidate(1) == 2",))
>>> code_prefix_score("Plan.\\n\\n```python\\nclass Solution:\\n    def add(self, x):\\n", p)
1.0
>>> code_prefix_score("```python\\nclass Solution(:\\n", p)
0.0
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codethinker.codegen.answer import defines_entry, extract_program, parses
from codethinker.codegen.crpl import recode_prompt
from codethinker.codegen.judge import JudgeLimits, judge_programs
from codethinker.codegen.reflexion import FORMAT_PROMPT, parse_response
from codethinker.codegen.task import ASK, CodegenProblem
from codethinker.config.loader import from_mapping
from codethinker.evaluation.codegen import PY_TAGS, fenced_blocks
from codethinker.rewards.codegen import format_score, outcome_score
from codethinker.rewards.recode import ProcessRewardModel, cg_scores, recode_program
from codethinker.rewards.reflexicoder import ReflexiConfig, draft_outcomes, reflexicoder_score
from codethinker.rewards.score import Score

__all__ = [
    "CODEGEN_REWARDS",
    "CodegenRewardSpec",
    "CodegenScore",
    "code_prefix_score",
    "codegen_spec",
    "compute_score",
    "problem_of",
    "reflexion_prefix_score",
]

CODEGEN_REWARDS = ("codegen_outcome", "reflexicoder", "cg_grpo", "cg_grpo_ungated", "recode_outcome")
FORMATS = {  # the prompt format of each kind
    "codegen_outcome": "codegen",
    "reflexicoder": "reflexion",
    "cg_grpo": "recode",
    "cg_grpo_ungated": "recode",
    "recode_outcome": "recode",
}
CODE_BLOCK_STOP = ("\n\n",)  # DBS: a reasoning paragraph or a group of code lines ends
REFLEXION_BLOCK_STOP = ("</answer>",)  # DBS: one answer of the reflect-and-revise trajectory ends
_FENCE = re.compile(r"^[ \t]*```")
_VERL_KEYS = ("fmt", "r_proc", "r_res", "reward", "rcs", "answer_ok")


@dataclass(frozen=True)
class CodegenScore:
    """One completion's :class:`Score` and what a GRPO step logs beside it (``cycles``: ReflexiCoder's n;
    ``pass_rates``: ReflexiCoder's pass rate of each answer, first draft first)."""

    score: Score
    cycles: int | None = None
    pass_rates: tuple[float, ...] = ()

    def log(self) -> dict[str, float]:
        out = {"reward": self.score.reward, "pass_rate": float(self.score.pass_rate or 0.0)}
        if self.cycles is not None:
            out["cycles"] = float(self.cycles)
        return out


def problem_of(truth: CodegenProblem | str | Mapping[str, Any]) -> CodegenProblem:
    """A problem from its JSON text or record (a :class:`CodegenProblem` is returned as it is)."""
    if isinstance(truth, CodegenProblem):
        return truth
    rec = json.loads(truth) if isinstance(truth, str) else dict(truth)
    return CodegenProblem.from_json(rec)


def code_prefix_score(prefix: str, problem: CodegenProblem) -> float:
    """1.0 while ``prefix`` can still become a well-formed one-block answer: at most one fenced block, tagged
    Python (or not yet tagged), whose code so far parses and, once the block is closed, defines the entry."""
    blocks = fenced_blocks(prefix)
    if len(blocks) > 1:
        return 0.0
    if not blocks:
        return 1.0
    tag, code = blocks[0]
    fences = sum(bool(_FENCE.match(line)) for line in prefix.splitlines())
    closed = fences >= 2 and fences % 2 == 0
    if tag not in PY_TAGS or not (parses(code) or (not closed and _parses_open(code))):
        return 0.0
    return 0.0 if closed and not defines_entry(code, problem.entry_point) else 1.0


def _parses_open(code: str) -> bool:
    """An unfinished block's code parses once its last header gets a body (``def f(x):`` + ``pass``)."""
    last = next((line for line in reversed(code.splitlines()) if line.strip()), "")
    indent = len(last) - len(last.lstrip())
    return parses(f"{code.rstrip()}\n{' ' * (indent + 4)}pass\n")


def reflexion_prefix_score(prefix: str, problem: CodegenProblem) -> float:
    """1.0 when ``prefix`` (ending at an answer) is a well-formed trajectory so far (no reflection yet is
    allowed) whose last answer defines the entry point, else 0.0."""
    t = parse_response(prefix)
    if t.reason not in (None, "no_reflection"):
        return 0.0
    program = extract_program(prefix.rsplit("<answer>", 1)[-1])
    return 1.0 if program and defines_entry(program, problem.entry_point) else 0.0


def _outcome(spec: CodegenRewardSpec, completions: Sequence[str], problems: Sequence[CodegenProblem]) -> list:
    verdicts = judge_programs(problems, [extract_program(c) for c in completions], spec.limits)
    out = []
    for c, p, v in zip(completions, problems, verdicts, strict=True):
        o, f = outcome_score(c, p, v), format_score(c, p)
        why = f.reason or o.reason
        s = Score(f.fmt, 0.0, o.reward, f.reward + o.reward, 0.0, o.answer_ok, why, pass_rate=o.pass_rate)
        out.append(CodegenScore(s))
    return out


def _reflexicoder(spec: CodegenRewardSpec, completions: Sequence[str], problems: Sequence[CodegenProblem]) -> list:
    trajectories = [parse_response(c) for c in completions]
    jobs = [(p, code) for t, p in zip(trajectories, problems, strict=True) for code in t.programs]
    verdicts = iter(judge_programs([p for p, _ in jobs], [c for _, c in jobs], spec.limits) if jobs else [])
    config = from_mapping(ReflexiConfig, spec.reflexicoder, "grpo.reflexicoder")
    out = []
    for i, t in enumerate(trajectories):
        rates = [next(verdicts).pass_rate for _ in t.programs]
        r = reflexicoder_score(t, rates, config, row=i)
        out.append(CodegenScore(r.score, r.cycles, r.pass_rates))
    return out


def _recode_rewards(
    spec: CodegenRewardSpec,
    completions: Sequence[str],
    problems: Sequence[CodegenProblem],
    gated: bool,
    process: bool = True,
) -> list:
    """ReCode's format, scored by :func:`~codethinker.rewards.recode.cg_scores` on the judged ``<answer>``
    programs: CG-GRPO (``cg_grpo``, ``gated``) and its ungated ablation with ``R_proc`` from the CRPL reward
    model (``spec.reward_model``, the ``reward_model`` stage's output) on each (ReCode prompt, completion);
    ``recode_outcome`` without the model (``process`` off: ``R_fmt + R_out``, outcome-only GRPO in that
    format, and how ``codegen_eval`` measures a CG-GRPO policy: the reward model trains, it does not score)."""
    verdicts = judge_programs(problems, [recode_program(c) for c in completions], spec.limits)
    if process:
        rm_scores = _process_model(spec.reward_model).score([recode_prompt(p) for p in problems], list(completions))
    else:
        rm_scores = [None] * len(completions)
    return [CodegenScore(s) for s in cg_scores(completions, problems, verdicts, rm_scores, gated=gated)]


@functools.lru_cache(maxsize=2)
def _process_model(path: str) -> Any:
    """The CRPL reward model at ``path``, loaded once per process (a clear error when it was not trained)."""
    if not (Path(path) / "config.json").is_file():
        raise FileNotFoundError(
            f"grpo.reward cg_grpo needs the CRPL reward model in {path} (run `dvc repro reward_model`)"
        )
    return ProcessRewardModel(path)


def recode_prefix_score(prefix: str, problem: CodegenProblem) -> float:
    """1.0 while ``prefix`` can still become a ReCode response (``<think>`` reasoning, then one well-formed
    answer block in ``<answer>``), else 0.0.

    >>> p = CodegenProblem("add", 1, "Easy", "v0.2.0", "Add one.", "", "", "Solution().add", ("assert 1",))
    >>> recode_prefix_score("<think>Add one.\\n\\n", p), recode_prefix_score("Sure! <think>", p)
    (1.0, 0.0)
    """
    text = prefix.lstrip()
    if not text.startswith("<think>"):
        return 1.0 if "<think>".startswith(text) else 0.0
    if any(text.count(tag) > 1 for tag in ("<think>", "</think>", "<answer>", "</answer>")):
        return 0.0
    if "<answer>" not in text:
        if "</think>" not in text:
            return 1.0
        think, rest = text.split("</think>", 1)
        return 1.0 if think.removeprefix("<think>").strip() and "<answer>".startswith(rest.strip()) else 0.0
    think, answer = text.split("<answer>", 1)
    if "</think>" not in think or not think.split("</think>")[0].removeprefix("<think>").strip():
        return 0.0
    return code_prefix_score(answer.split("</answer>")[0], problem)


# kind -> its batched score (the registry: a new code-generation reward is one entry here and in FORMATS)
SCORERS: dict[str, Callable[[CodegenRewardSpec, Sequence[str], Sequence[CodegenProblem]], list]] = {
    "codegen_outcome": _outcome,
    "reflexicoder": _reflexicoder,
    "cg_grpo": functools.partial(_recode_rewards, gated=True),
    "cg_grpo_ungated": functools.partial(_recode_rewards, gated=False),
    "recode_outcome": functools.partial(_recode_rewards, gated=True, process=False),
}


@dataclass(frozen=True)
class CodegenRewardSpec:
    """A code-generation reward: its kind, ReflexiCoder's coefficients and the judge's limits."""

    kind: str = field(default="codegen_outcome", metadata={"help": " | ".join(CODEGEN_REWARDS)})
    reflexicoder: dict[str, Any] = field(default_factory=dict, metadata={"help": "ReflexiConfig fields"})
    judge: dict[str, Any] = field(default_factory=dict, metadata={"help": "JudgeLimits fields (codegen.*)"})
    reward_model: str = field(
        default="models/reward_model", metadata={"help": "cg_grpo: the CRPL reward model (grpo's --reward-model)"}
    )

    def __post_init__(self) -> None:
        if self.kind not in CODEGEN_REWARDS:
            raise ValueError(f"a code-generation reward must be one of {', '.join(CODEGEN_REWARDS)}, got {self.kind!r}")
        from_mapping(ReflexiConfig, self.reflexicoder, "grpo.reflexicoder")
        self.limits  # noqa: B018  (a misspelled judge limit stops here)

    @property
    def limits(self) -> JudgeLimits:
        return from_mapping(JudgeLimits, {k: v for k, v in self.judge.items() if v is not None}, "codegen judge")

    @property
    def format(self) -> str:
        """The prompt format: ``codegen`` (one fenced block), ``reflexion`` (ReflexiCoder's layout) or
        ``recode`` (``<think>`` then ``<answer>``)."""
        return FORMATS[self.kind]

    @property
    def stop(self) -> list[str]:
        """A response ends at the end of turn (no stop string)."""
        return []

    @property
    def blocks(self) -> bool:
        return True

    @property
    def block_stop(self) -> list[str]:
        return list(REFLEXION_BLOCK_STOP if self.format == "reflexion" else CODE_BLOCK_STOP)

    def prompt(self, problem: CodegenProblem) -> list[dict[str, str]]:
        """The chat prompt: the problem's own, or its statement and ReflexiCoder's format instruction."""
        if self.format == "reflexion":
            statement = problem.prompt.removesuffix(ASK).rstrip()
            return [{"role": "user", "content": f"{statement}\n\n{FORMAT_PROMPT}"}]
        if self.format == "recode":
            return [{"role": "user", "content": recode_prompt(problem)}]
        return [{"role": "user", "content": problem.prompt}]

    def prefix_scorer(self, truth: str) -> Callable[[str], float]:
        """DBS's scorer of a prefix for the problem ``truth`` (its JSON)."""
        fn = {"reflexion": reflexion_prefix_score, "recode": recode_prefix_score}.get(self.format, code_prefix_score)
        return functools.partial(fn, problem=problem_of(truth))

    def score_batch(self, completions: Sequence[str], truths: Sequence[Any]) -> list[CodegenScore]:
        """Each completion's score against its problem; every program judged in one sandbox."""
        problems = [problem_of(t) for t in truths]
        if len(problems) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(problems)} problems")
        return SCORERS[self.kind](self, list(completions), problems) if completions else []

    def kwargs(self) -> dict[str, Any]:
        """verl's ``reward_kwargs``: the kind and its settings."""
        out: dict[str, Any] = {"reward": self.kind}
        if self.kind == "reflexicoder" and self.reflexicoder:
            out["reflexicoder"] = dict(self.reflexicoder)
        if self.format == "recode":
            out["reward_model"] = self.reward_model
        judge = {k: v for k, v in asdict(self.limits).items() if v is not None}
        return {**out, "judge": judge}


def codegen_spec(
    kind: str,
    reflexicoder: Mapping[str, Any] | None = None,
    judge: Mapping[str, Any] | None = None,
    reward_model: str | None = None,
) -> CodegenRewardSpec:
    """A checked :class:`CodegenRewardSpec` (``ValueError`` naming the key when a setting is wrong)."""
    rm = {"reward_model": str(reward_model)} if reward_model else {}
    return CodegenRewardSpec(kind, dict(reflexicoder or {}), dict(judge or {}), **rm)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    reward: str | None = None,
    reflexicoder: Mapping[str, Any] | None = None,
    judge: Mapping[str, Any] | None = None,
    reward_model: str | None = None,
) -> dict[str, Any]:
    """verl's reward of one response for a code-generation kind: ``score`` and its parts (``pass_rate``;
    ``cycles`` and the draft outcomes, :func:`~codethinker.rewards.reflexicoder.draft_outcomes`, for
    ReflexiCoder). Settings from the keywords, else from ``extra_info``."""
    info = dict(extra_info or {})
    spec = codegen_spec(
        reward or info.get("reward") or "codegen_outcome",
        reflexicoder if reflexicoder is not None else info.get("reflexicoder"),
        judge if judge is not None else info.get("judge"),
        reward_model or info.get("reward_model"),
    )
    [out] = spec.score_batch([solution_str], [ground_truth])
    result: dict[str, Any] = {k: out.score[k] for k in _VERL_KEYS}
    result.update(score=out.score.reward, pass_rate=float(out.score.pass_rate or 0.0))
    if out.cycles is not None:
        result["cycles"] = out.cycles
        result.update(draft_outcomes(out.pass_rates))
    return result
