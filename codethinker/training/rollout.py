"""GRPO rollouts: a group of regular + DBS samples per prompt, from the *current* policy.

:class:`Rollout` is TRL's ``rollout_func``. TRL hands it each prompt repeated once per
generation (``n_greedy + n_regular + n_dbs`` consecutive copies; ENVIRONMENT.md); it returns one completion
per copy: the greedy answer where ``n_greedy`` is 1, then the regular samples, then the DBS samples
(:mod:`codethinker.sampling.dbs`, scored by a prefix PRM bound to the prompt's ground truth).

Policy sync (github.com/volcengine/verl/issues/7495: a rollout engine that kept sampling from the initial weights):
- ``vllm``: before the first rollout after each optimizer step the trainer's policy is saved and
  pushed to the engine: its LoRA adapter under a new adapter id (``push="lora"``,
  :meth:`VLLMEngine.set_lora`), or all its weights, loaded in place (``push="full"``, GRPO with
  ``finetune: full``, :meth:`VLLMEngine.set_weights`);
- ``hf``: the engine wraps the live training model, so it always samples from the current one; it runs a
  step's regular samples as one ``generate`` batch and each DBS round as one (``HFEngine.continue_requests``),
  in calls of at most ``grpo.hf_batch_size`` sequences, with ``grpo.hf_cache``'s KV cache.

>>> rollout = Rollout(engine, tok, truths, RolloutParams(), adapter_root=Path("tmp"))  # doctest: +SKIP
>>> GRPOTrainer(..., rollout_func=rollout)  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import json
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codethinker.engines.base import PrefixRequest, Program, one_call, run_programs
from codethinker.sampling.dbs import BLOCK_STOP, FINAL_STOP, DBSConfig, DBSRun

__all__ = ["Rollout", "RolloutParams", "prompt_key"]

_DBS = DBSConfig()  # DBS's own defaults, which the group's settings share


@dataclass
class RolloutParams:
    """A GRPO group (``grpo.rollout``): regular samples plus DBS ones, whose DBS settings are a
    :class:`~codethinker.sampling.dbs.DBSConfig` under the params' names (:meth:`dbs`)."""

    n_regular: int = field(default=4, metadata={"help": "regular samples per prompt (paper: 4)"})
    n_greedy: int = field(
        default=0,
        metadata={
            "help": "0 or 1: the policy's greedy (temperature 0) answer as one more member of each group, first, "
            "so it gets its own advantage (paper: 0)"
        },
    )
    n_dbs: int = field(default=_DBS.budget, metadata={"help": "DBS samples per prompt (paper: 4); 0 turns DBS off"})
    max_completion_tokens: int | str = field(
        default=4096,
        metadata={"help": "length limit of one response; auto: 1.25 x the longest ground-truth trace of the prompts"},
    )
    temperature: float = field(default=_DBS.temperature, metadata={"help": "sampling temperature (both kinds)"})
    block_stop: list[str] = field(
        default_factory=lambda: list(BLOCK_STOP), metadata={"help": "DBS: stop strings that end a block"}
    )
    final_stop: list[str] = field(
        default_factory=lambda: list(FINAL_STOP), metadata={"help": "stop strings that end a response"}
    )
    dbs_max_rounds: int = field(
        default=_DBS.max_rounds, metadata={"help": "DBS: block rounds before running to the end"}
    )
    filter_groups: bool = field(
        default=False,
        metadata={
            "help": "DAPO's dynamic sampling: a group whose rewards are all equal has every advantage 0, so draw "
            "further prompts' groups until the step holds as many groups with unequal rewards as it asked for "
            "(or max_gen_batches batches were drawn; the rest is filled with equal-reward groups)"
        },
    )
    oversample: int = field(
        default=1,
        metadata={
            "help": "filter_groups: a generation batch is oversample x the step's prompts, drawn in one engine batch "
            "(a larger batch samples more tokens per second)"
        },
    )
    max_gen_batches: int = field(
        default=2,
        metadata={"help": "filter_groups: the most generation batches one step draws (the first included)"},
    )

    def __post_init__(self) -> None:
        for name in ("oversample", "max_gen_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"grpo.rollout.{name} must be >= 1, got {getattr(self, name)}")
        if self.n_greedy not in (0, 1):
            raise ValueError(
                f"grpo.rollout.n_greedy must be 0 or 1 (greedy answers are all the same), got {self.n_greedy}"
            )

    @property
    def group(self) -> int:
        return self.n_greedy + self.n_regular + self.n_dbs

    def dbs(self, seed: int | None = None) -> DBSConfig:
        """The DBS run of one group: ``n_dbs`` trajectories under the group's limit, stops and temperature."""
        return DBSConfig(
            budget=self.n_dbs,
            max_tokens=int(self.max_completion_tokens),
            block_stop=list(self.block_stop),
            final_stop=list(self.final_stop),
            temperature=self.temperature,
            max_rounds=self.dbs_max_rounds,
            seed=seed,
        )


def prompt_key(messages: Any) -> str:
    """A stable key for a chat prompt (TRL passes prompts, not dataset rows, to ``rollout_func``)."""
    return json.dumps([{"role": m["role"], "content": m["content"]} for m in messages], sort_keys=True)


@dataclass
class RolloutStats:
    regular_tokens: int = 0  # the greedy member's included
    dbs_tokens_generated: int = 0
    dbs_tokens_dropped: int = 0
    dbs_rounds: int = 0
    calls: int = 0
    regular_s: float = 0.0  # wall seconds from the rollout's start until its greedy and regular completions are in
    dbs_s: float = 0.0  # ... until DBS's are (its rounds, scoring of prefixes included; both overlap on vLLM)
    rollout_s: float = 0.0  # wall seconds of the rollouts (regular and DBS together)
    sync_s: float = 0.0  # wall seconds pushing the policy's weights to the engine
    cache_queried: int = 0  # prompt tokens of the rollout's calls (regular and DBS) vLLM looked up in its prefix cache
    cache_hits: int = 0  # ... and found there
    groups_drawn: int = 0  # groups sampled (filter_groups: the further prompts' included)
    groups_informative: int = 0  # ... whose rewards were not all equal

    def take(self) -> dict[str, float]:
        out = {
            "rollout/regular_tokens": self.regular_tokens,
            "rollout/dbs_tokens_generated": self.dbs_tokens_generated,
            "rollout/dbs_tokens_dropped": self.dbs_tokens_dropped,
            "rollout/dbs_rounds": self.dbs_rounds / max(self.calls, 1),
            "rollout/rollout_regular_s": self.regular_s,
            "rollout/rollout_dbs_s": self.dbs_s,
            "rollout/rollout_s": self.rollout_s,
            "rollout/sync_s": self.sync_s,
            "rollout/cache_queried": self.cache_queried,
            "rollout/cache_hits": self.cache_hits,
            "rollout/cache_hit_rate": self.cache_hits / max(self.cache_queried, 1),
            "rollout/gen_batches": self.calls,
        }
        if self.groups_drawn:  # filter_groups: what it drew (TRL logs frac_reward_zero_std of the groups trained on)
            out["rollout/groups_drawn"] = self.groups_drawn
            out["rollout/groups_informative"] = self.groups_informative
        self.__init__()  # type: ignore[misc]
        return {k: float(v) for k, v in out.items()}


class Rollout:
    """TRL ``rollout_func``: regular + DBS samples per prompt from the current policy."""

    def __init__(
        self,
        kind: str,
        engine: Any,
        tokenizer: Any,
        truths: dict[str, str],
        p: RolloutParams,
        scorer: Callable[[str, Any], float] | None = None,
        adapter_root: Path | None = None,
        seed: int = 0,
        scorer_for: Callable[[str], Callable[[str], float]] | None = None,
        push: str = "lora",
        pool: list[Any] | None = None,
        group_reward: Callable[[list[str], list[str]], list[float]] | None = None,
        hf_options: dict[str, Any] | None = None,
    ):
        if push not in ("lora", "full"):
            raise ValueError(f"push must be lora or full, got {push!r}")
        if p.filter_groups and group_reward is None:
            raise ValueError("filter_groups needs group_reward: the rewards that tell an informative group")
        # filter_groups: the chat prompts further groups are drawn from (in a seeded order) and their rewards
        self.pool, self.group_reward = list(pool or []), group_reward
        self._order = random.Random(seed).sample(range(len(self.pool)), len(self.pool))
        self._cursor = 0
        self.kind, self.engine, self.tok, self.truths, self.p = kind, engine, tokenizer, truths, p
        self.push = push
        self.hf_options = dict(hf_options or {})  # kind hf: HFEngine's settings (batch_size, cache)
        self.adapter_root = Path(adapter_root) if adapter_root else None
        self.seed, self.calls = seed, 0
        if scorer is None:
            from codethinker.contra.validate import prefix_score

            scorer = prefix_score
        self.scorer = scorer
        # DBS's prefix scorer of one prompt from its truth (default: ``scorer`` bound to the truth's Flow)
        self.scorer_for = scorer_for or self._flow_scorer
        self.synced_step: int | None = None
        self.pushed: list[Path] = []  # adapters (or full weights) pushed to vLLM, in order (tests read it)
        self.stats = RolloutStats()
        self.im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def _flow_scorer(self, truth: str) -> Callable[[str], float]:
        from codethinker.contra.tracer import Flow

        return functools.partial(self.scorer, flow=Flow.from_json(truth))

    # -- policy sync --------------------------------------------------------------------------------
    def sync(self, trainer: Any) -> None:
        if self.kind == "static":  # a fixed engine (tests, or sampling from a frozen server)
            return
        step = int(trainer.state.global_step)
        model = trainer.accelerator.unwrap_model(trainer.model)
        if self.kind == "hf":
            if self.engine is None or self.engine.model is not model:
                from codethinker.engines.hf import HFEngine

                self.engine = HFEngine(model, self.tok, **self.hf_options)
            return
        if step == self.synced_step:
            return
        if self.adapter_root is None:
            raise RuntimeError("vLLM rollouts need adapter_root to push the policy's weights")
        d = self.adapter_root / f"step-{step}"
        model.save_pretrained(str(d))  # the adapter (lora) or the whole model (full)
        (self.engine.set_lora if self.push == "lora" else self.engine.set_weights)(d)
        self.synced_step = step
        self.pushed.append(d)
        for old in self.pushed[:-2]:  # keep the last two on disk
            shutil.rmtree(old, ignore_errors=True)

    def completion_ids(self, prompt: str, p_ids: list[int], completion: str) -> list[int]:
        """The ids the engine sampled for ``completion`` after ``prompt`` (vLLM keeps them:
        :meth:`~codethinker.engines.vllm.VLLMEngine.sampled_ids`), else the completion re-encoded."""
        full = getattr(self.engine, "sampled_ids", lambda text: None)(prompt + completion)
        if full is not None and full[: len(p_ids)] == p_ids:
            return full[len(p_ids) :]
        return self.tok(completion, add_special_tokens=False).input_ids

    # -- sampling -----------------------------------------------------------------------------------
    def sample(self, prompts: list[Any]) -> tuple[list[str], list[list[Any]]]:
        """Chat prompts (one per group) -> (prompt texts, per prompt: greedy, regular then DBS completions)."""
        p = self.p
        texts = [self.tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in prompts]
        seed = self.seed * 100_003 + self.calls
        self.calls += 1
        programs: dict[str, Program] = {}  # by kind, in group order
        finished: dict[str, float] = {}
        t0 = time.perf_counter()

        def timed(name: str, prog: Program) -> Program:  # when each program ends (they overlap on vLLM)
            result = yield from prog
            finished[name] = time.perf_counter() - t0
            return result

        if p.n_greedy:
            req = PrefixRequest(texts, 1, list(p.final_stop), p.max_completion_tokens, 0.0, seed)
            programs["greedy"] = timed("greedy", one_call(req))
        if p.n_regular:
            req = PrefixRequest(texts, p.n_regular, list(p.final_stop), p.max_completion_tokens, p.temperature, seed)
            programs["regular"] = timed("regular", one_call(req))
        run = None
        if p.n_dbs:
            scorers = [self.scorer_for(self.truths[prompt_key(m)]) for m in prompts]
            run = DBSRun(texts, scorers, p.dbs(seed + 50_000))
            programs["dbs"] = timed("dbs", run.program())
        counts = getattr(self.engine, "prefix_cache_counts", lambda: (0, 0))
        before = counts()
        outs = dict(zip(programs, run_programs(self.engine, list(programs.values())), strict=True))
        after = counts()
        self.stats.cache_queried += after[0] - before[0]
        self.stats.cache_hits += after[1] - before[1]
        greedy: list[list[Any]] = outs.get("greedy", [[] for _ in texts])
        regular: list[list[Any]] = outs.get("regular", [[] for _ in texts])
        dbs: list[list[Any]] = [[] for _ in texts]
        if run is not None:
            results = outs["dbs"]
            dbs = [r.completions for r in results]
            self.stats.dbs_tokens_generated += sum(r.tokens_generated for r in results)
            self.stats.dbs_tokens_dropped += sum(r.tokens_dropped for r in results)
            self.stats.dbs_rounds += max(r.rounds for r in results)
        self.stats.regular_s += max(finished.get("greedy", 0.0), finished.get("regular", 0.0))
        self.stats.dbs_s += finished.get("dbs", 0.0)
        self.stats.rollout_s += time.perf_counter() - t0
        self.stats.regular_tokens += sum(c.n_tokens for rows in (greedy, regular) for row in rows for c in row)
        self.stats.calls += 1
        return texts, [g + r + d for g, r, d in zip(greedy, regular, dbs, strict=True)]

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        g = self.p.group
        if len(prompts) % g:
            raise ValueError(f"rollout got {len(prompts)} prompts, not a multiple of the group size {g}")
        groups = [prompts[i : i + g] for i in range(0, len(prompts), g)]
        for grp in groups:
            if any(prompt_key(x) != prompt_key(grp[0]) for x in grp):
                raise ValueError("rollout expects each prompt repeated once per generation, consecutively")
        t0 = time.perf_counter()
        wake, sleep = (getattr(self.engine, name, None) for name in ("wake_up", "sleep"))
        if wake:  # vLLM's sleep mode (grpo.vllm_sleep, GPU): weights back, a fresh KV cache
            wake()
        self.sync(trainer)
        self.stats.sync_s += time.perf_counter() - t0
        firsts = [grp[0] for grp in groups]
        try:
            if self.p.filter_groups:
                keys, texts, comps = self.sample_informative(firsts)
            else:
                texts, comps = self.sample(firsts)
                keys = [prompt_key(m) for m in firsts]
        finally:
            if sleep:  # the update gets the memory of vLLM's weights and KV cache
                sleep()
        prompt_ids, completion_ids, kinds = [], [], []
        cap = self.p.max_completion_tokens
        for text, row in zip(texts, comps, strict=True):
            p_ids = self.tok(text, add_special_tokens=False).input_ids
            for k, c in enumerate(row):
                ids = self.completion_ids(text, p_ids, c.text)[:cap]
                if (c.finish_reason == "stop" and len(ids) < cap and ids[-1:] != [self.im_end]) or not ids:
                    ids.append(self.im_end)  # the response ended: teach the end of turn
                prompt_ids.append(p_ids)
                completion_ids.append(ids)
                kinds.append(self.kind_of(k))
        getattr(self.engine, "forget", lambda: None)()  # the engine's ids of this step are read: drop them
        out = {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None, "rollout_kind": kinds}
        if self.p.filter_groups:  # groups may be other prompts than TRL's: the reward reads their truths
            out["truth"] = [self.truths[k] for k in keys for _ in range(g)]
        return out

    def kind_of(self, k: int) -> str:
        """The kind of a group's ``k``-th member: greedy first, then regular, then DBS."""
        p = self.p
        return "greedy" if k < p.n_greedy else "regular" if k < p.n_greedy + p.n_regular else "dbs"

    # -- dynamic sampling (filter_groups) -----------------------------------------------------------
    def informative(self, keys: list[str], comps: list[list[Any]]) -> list[bool]:
        """Per group: whether its rewards differ (an all-equal group has every advantage 0)."""
        assert self.group_reward is not None
        texts = [c.text for row in comps for c in row]
        truths = [self.truths[k] for k, row in zip(keys, comps, strict=True) for _ in row]
        rewards = self.group_reward(texts, truths)
        flags, i = [], 0
        for row in comps:
            r = rewards[i : i + len(row)]
            i += len(row)
            flags.append(bool(r) and max(r) - min(r) > 1e-9)
        return flags

    def draw(self, n: int, taken: set[str]) -> list[Any]:
        """Up to ``n`` pool prompts not in ``taken``, in the pool's seeded order (cycling over it)."""
        out: list[Any] = []
        for _ in range(len(self.pool)):
            if len(out) == n:
                break
            m = self.pool[self._order[self._cursor]]
            self._cursor = (self._cursor + 1) % len(self.pool)
            if prompt_key(m) not in taken:
                taken.add(prompt_key(m))
                out.append(m)
        return out

    def sample_informative(self, prompts: list[Any]) -> tuple[list[str], list[str], list[list[Any]]]:
        """DAPO's dynamic sampling: generation batches of ``prompts`` (TRL's) plus further pool prompts,
        ``oversample`` x ``len(prompts)`` groups each, until ``len(prompts)`` groups have unequal rewards or
        ``max_gen_batches`` batches were drawn; the informative groups first, in the order drawn, then
        equal-reward ones. Returns (prompt keys, prompt texts, completions) of the groups handed over."""
        n = len(prompts)
        size = n * self.p.oversample
        taken = {prompt_key(m) for m in prompts}
        batch = [*prompts, *self.draw(size - n, taken)]
        cand: list[tuple[str, str, list[Any]]] = []
        flags: list[bool] = []
        for _ in range(self.p.max_gen_batches):
            if not batch:
                break
            texts, comps = self.sample(batch)
            keys = [prompt_key(m) for m in batch]
            cand += zip(keys, texts, comps, strict=True)
            flags += self.informative(keys, comps)
            if sum(flags) >= n:
                break
            batch = self.draw(size, taken)
        chosen = [c for c, f in zip(cand, flags, strict=True) if f][:n]
        chosen += [c for c, f in zip(cand, flags, strict=True) if not f][: n - len(chosen)]
        self.stats.groups_drawn += len(cand)
        self.stats.groups_informative += sum(flags)
        return [c[0] for c in chosen], [c[1] for c in chosen], [c[2] for c in chosen]
