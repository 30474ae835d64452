"""DBS inside verl's rollout: the agent loop ``codethinker_dbs`` (imported only where verl is).

verl repeats each prompt ``rollout.n`` times (interleaved, with one ``uid`` per prompt) and runs
one agent loop per copy, all copies of a worker's batch concurrently in one event loop. This loop
numbers the copies of a prompt as they arrive: the first ``n_regular`` sample one whole response
each (stopped at ``[/TRACE]``); the first DBS copy starts one DBS tree for the prompt
(:func:`codethinker.sampling.dbs.dbs_sample_async` over verl's vLLM servers, scored with the
prefix PRM against the row's ground truth, or with the task's own prefix score, e.g. code
generation's, :func:`prefix_scorer_for`), and every DBS copy takes one of its final
trajectories. DBS counts go to ``extra_fields`` (``dbs``, ``dbs_tokens_generated``,
``dbs_tokens_dropped``; 0 on regular samples). Requires a prompt's copies to land on one agent-loop
worker, which holds when the batch splits at group boundaries (verl chunks the interleaved batch
evenly).

**Trained ids are the sampled ids.** The prompt is tokenized once
(:func:`codethinker.training.grpo_verl.prompt_token_ids`). A DBS continuation is requested with the
prompt's ids plus the exact ids the engine returned for its prefix, and a final trajectory is the
concatenation of the ids the engine returned along its path (:class:`_IdTrail`); text is only what
DBS scores. Re-encoding the text would not give these ids back: a block that ends in ``]`` followed
by a continuation that starts with ``\\n`` re-encodes as the single token ``]\\n``.

**Both kinds end the same way: with ``<|im_end|>`` when the response ended** (a stop string or
EOS), with nothing at the length limit. verl stops generation at the stop string, so the end-of-turn
token is never sampled after ``[/TRACE]``; appending it puts it under verl's loss mask (every
response token has ``response_mask`` 1, and with ``calculate_log_probs=false`` verl recomputes the
old log-probabilities with the actor, so the appended token is trained like a sampled one). The
policy thus learns to close its turn after the trace, which chat-template evaluation without stop
strings relies on; the local backend does the same. A response the engine already ended with an end
token (``<|im_end|>`` or the tokenizer's EOS) gets nothing added. verl's reward decodes with
``skip_special_tokens``, so the score is unaffected.

**Seeds.** With ``seed`` set (``grpo.seed``), each DBS tree gets its own base seed from
``(seed, group key)`` and every engine request its own seed from ``(round seed, prefix index,
sample index)`` (:func:`sibling_seed`): sibling prefixes and the samples of one prefix never share a
sampling stream. ``seed: null`` leaves seeding to verl's servers.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from codethinker.engines.base import Completion
from codethinker.engines.hf import cut_at_stop
from codethinker.sampling.dbs import BLOCK_STOP, FINAL_STOP, DBSConfig, dbs_sample_async
from codethinker.training.grpo_verl import prompt_token_ids

__all__ = ["DBSAgentLoop", "sibling_seed"]

_GROUPS: dict[str, dict[str, Any]] = {}  # per worker process: prompt key -> arrivals, DBS task, taken
END_OF_TURN = "<|im_end|>"


def _group_key(kwargs: dict[str, Any]) -> str:
    for k in ("uid", "index"):
        if kwargs.get(k) is not None:
            return f"{k}:{kwargs[k]}"
    return f"prompt:{kwargs.get('raw_prompt')!r}"


def sibling_seed(*parts: Any) -> int:
    """A 31-bit seed from ``parts`` (stable across processes and runs, unlike ``hash``).

    >>> sibling_seed(7, 0, 1) == sibling_seed(7, 0, 1) != sibling_seed(7, 1, 0)
    True
    """
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


class _IdTrail:
    """The token ids of every DBS prefix, keyed by its text (the root ``""`` has none).

    A prefix's ids are exactly what the engine was conditioned on and returned along its path. Two
    different paths with identical text keep the first one's ids; every later continuation of that
    text is then requested with those ids, so a trajectory's ids are still the ones it was sampled
    with.
    """

    def __init__(self) -> None:
        self._ids: dict[str, list[int]] = {"": []}

    def ids(self, text: str) -> list[int]:
        return list(self._ids[text])

    def extend(self, prefix: str, text: str, new_ids: list[int]) -> None:
        self._ids.setdefault(prefix + text, [*self._ids[prefix], *new_ids])


def prefix_scorer_for(task: str, reward: str, truth: str) -> Any:
    """DBS's prefix scorer of one prompt: the task's (:meth:`Task.prefix_scorer
    <codethinker.tasks.base.Task.prefix_scorer>`, e.g. a code-generation reward's structural score), else the
    ConTra PRM on the truth's Flow."""
    from codethinker.tasks import get_task

    t = get_task(task)
    scorer = t.prefix_scorer(t.reward_spec(reward, {}))
    if scorer is not None:
        return scorer(truth)
    from codethinker.contra.tracer import Flow
    from codethinker.contra.validate import prefix_score

    return functools.partial(prefix_score, flow=Flow.from_json(truth))


class DBSAgentLoop(AgentLoopBase):
    def __init__(
        self,
        *args: Any,
        n_regular: int = 4,
        n_dbs: int = 4,
        block_stop: list[str] | None = None,
        final_stop: list[str] | None = None,
        max_rounds: int = 64,
        seed: int | None = None,
        task: str = "output_prediction",
        reward: str = "crm",
        **kwargs: Any,
    ):
        kwargs.pop("name", None)
        super().__init__(*args, **kwargs)
        self.n_regular, self.n_dbs, self.max_rounds, self.seed = n_regular, n_dbs, max_rounds, seed
        self.task, self.reward = task, reward  # DBS's prefix score is the task's (prefix_scorer_for)
        self.block_stop = list(BLOCK_STOP if block_stop is None else block_stop)
        self.final_stop = list(FINAL_STOP if final_stop is None else final_stop)  # [] (codegen): end of turn only
        self.response_length = self.rollout_config.response_length
        eot = self.tokenizer.convert_tokens_to_ids(END_OF_TURN)
        unk = getattr(self.tokenizer, "unk_token_id", None)
        self.end_of_turn = eot if isinstance(eot, int) and eot != unk else self.tokenizer.eos_token_id
        self.end_ids = {i for i in (self.end_of_turn, self.tokenizer.eos_token_id) if i is not None}

    async def _prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        return prompt_token_ids(self.tokenizer, messages, **self.apply_chat_template_kwargs)

    def _finished(self, ids: list[int], stop: list[str]) -> tuple[str, bool]:
        """(text, ended): ended = the engine stopped at EOS or at a stop string, not at a length limit."""
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return text, bool(ids and ids[-1] in self.end_ids) or cut_at_stop(text, stop)[1] is not None

    def _end_turn(self, ids: list[int], ended: bool) -> list[int]:
        """The response as trained: ``ids`` plus the end-of-turn token when it ended without one."""
        ended_already = bool(ids) and ids[-1] in self.end_ids
        return [*ids, self.end_of_turn] if ended and not ended_already else list(ids)

    async def _continue(
        self,
        prompt_ids: list[int],
        base: dict[str, Any],
        trail: _IdTrail,
        prefixes: list[str],
        n: int,
        *,
        stop: list[str],
        max_tokens: int,
        temperature: float,
        seed: int | None,
    ) -> list[list[Completion]]:
        async def one(i: int, prefix: str, j: int) -> Completion:
            params = {
                **base,
                "stop": stop,
                "include_stop_str_in_output": True,
                "max_tokens": max_tokens,
                "temperature": temperature,
                "logprobs": False,
            }
            if seed is not None:
                params["seed"] = sibling_seed(seed, i, j)
            out = await self.server_manager.generate(
                request_id=uuid4().hex, prompt_ids=prompt_ids + trail.ids(prefix), sampling_params=params
            )
            new_ids = list(out.token_ids)
            text, ended = self._finished(new_ids, stop)
            trail.extend(prefix, text, new_ids)
            return Completion(text=text, n_tokens=len(new_ids), finish_reason="stop" if ended else "length")

        rows = await asyncio.gather(
            *(asyncio.gather(*(one(i, p, j) for j in range(n))) for i, p in enumerate(prefixes))
        )
        return [list(r) for r in rows]

    def _output(self, prompt_ids: list[int], response_ids: list[int], extra: dict[str, Any]) -> AgentLoopOutput:
        response_ids = response_ids[: self.response_length]
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=[1] * len(response_ids),
            num_turns=2,
            metrics=AgentLoopMetrics(),
            extra_fields=extra,
        )

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        key = _group_key(kwargs)
        group = _GROUPS.setdefault(key, {"arrivals": 0, "task": None, "taken": 0})
        k = group["arrivals"]
        group["arrivals"] += 1
        prompt_ids = await self._prompt_ids(list(kwargs["raw_prompt"]))
        if k < self.n_regular or self.n_dbs == 0:
            if group["arrivals"] >= self.n_regular + self.n_dbs:
                _GROUPS.pop(key, None)
            params = {
                **sampling_params,
                "stop": self.final_stop,
                "include_stop_str_in_output": True,
                "max_tokens": self.response_length,
                "logprobs": False,
            }
            out = await self.server_manager.generate(
                request_id=uuid4().hex, prompt_ids=prompt_ids, sampling_params=params
            )
            ids = list(out.token_ids)
            _, ended = self._finished(ids, self.final_stop)
            extra = {"dbs": 0, "dbs_tokens_generated": 0, "dbs_tokens_dropped": 0}
            return self._output(prompt_ids, self._end_turn(ids, ended), extra)
        if group["task"] is None:
            scorer = prefix_scorer_for(self.task, self.reward, kwargs["reward_model"]["ground_truth"])
            cfg = DBSConfig(
                budget=self.n_dbs,
                max_tokens=self.response_length,
                block_stop=self.block_stop,
                final_stop=self.final_stop,
                temperature=float(sampling_params.get("temperature", 1.0)),
                max_rounds=self.max_rounds,
                seed=None if self.seed is None else sibling_seed(self.seed, key),
            )
            trail = _IdTrail()
            group["trail"] = trail
            cont = functools.partial(self._continue, prompt_ids, dict(sampling_params), trail)
            group["task"] = asyncio.ensure_future(dbs_sample_async(cont, [""], [scorer], cfg))
        [res] = await group["task"]
        j = k - self.n_regular
        group["taken"] += 1
        if group["taken"] >= self.n_dbs:
            _GROUPS.pop(key, None)
        c = res.completions[j]
        ids = self._end_turn(group["trail"].ids(c.text), c.finish_reason == "stop")
        first = j == 0  # the group's DBS cost is reported once
        return self._output(
            prompt_ids,
            ids,
            {
                "dbs": 1,
                "dbs_tokens_generated": res.tokens_generated if first else 0,
                "dbs_tokens_dropped": res.tokens_dropped if first else 0,
            },
        )
