"""DBS inside verl's rollout: the agent loop ``codethinker_dbs`` (imported only where verl is).

verl repeats each prompt ``rollout.n`` times (interleaved, with one ``uid`` per prompt) and runs
one agent loop per copy, all copies of a worker's batch concurrently in one event loop. This loop
numbers the copies of a prompt as they arrive: the first ``n_regular`` sample one whole response
each (stopped at ``[/TRACE]``); the first DBS copy starts one DBS tree for the prompt
(:func:`codethinker.sampling.dbs.dbs_sample_async` over verl's vLLM servers, scored with the
prefix PRM against the row's ground truth), and every DBS copy takes one of its final
trajectories. DBS counts go to ``extra_fields`` (``dbs``, ``dbs_tokens_generated``,
``dbs_tokens_dropped``). Requires a prompt's copies to land on one agent-loop worker, which holds
when the batch splits at group boundaries (verl chunks the interleaved batch evenly).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from codethinker.engines.base import Completion
from codethinker.engines.hf import cut_at_stop
from codethinker.sampling.dbs import DBSConfig, dbs_sample_async

__all__ = ["DBSAgentLoop"]

_GROUPS: dict[str, dict[str, Any]] = {}  # per worker process: prompt key -> arrivals, DBS task, taken


def _group_key(kwargs: dict[str, Any]) -> str:
    for k in ("uid", "index"):
        if kwargs.get(k) is not None:
            return f"{k}:{kwargs[k]}"
    return f"prompt:{kwargs.get('raw_prompt')!r}"


class DBSAgentLoop(AgentLoopBase):
    def __init__(
        self,
        *args: Any,
        n_regular: int = 4,
        n_dbs: int = 4,
        block_stop: list[str] | None = None,
        final_stop: list[str] | None = None,
        max_rounds: int = 64,
        **kwargs: Any,
    ):
        kwargs.pop("name", None)
        super().__init__(*args, **kwargs)
        self.n_regular, self.n_dbs, self.max_rounds = n_regular, n_dbs, max_rounds
        self.block_stop = list(block_stop or ["[/LOCALS]"])
        self.final_stop = list(final_stop or ["[/TRACE]"])
        self.response_length = self.rollout_config.response_length

    async def _prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        return list(
            self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, **self.apply_chat_template_kwargs
            )
        )

    async def _continue(
        self,
        prompt_ids: list[int],
        base: dict[str, Any],
        prefixes: list[str],
        n: int,
        *,
        stop: list[str],
        max_tokens: int,
        temperature: float,
        seed: int | None,
    ) -> list[list[Completion]]:
        async def one(prefix: str) -> Completion:
            ids = prompt_ids + self.tokenizer.encode(prefix, add_special_tokens=False)
            params = {
                **base,
                "stop": stop,
                "include_stop_str_in_output": True,
                "max_tokens": max_tokens,
                "temperature": temperature,
                "logprobs": False,
            }
            out = await self.server_manager.generate(request_id=uuid4().hex, prompt_ids=ids, sampling_params=params)
            text, matched = cut_at_stop(self.tokenizer.decode(out.token_ids, skip_special_tokens=True), stop)
            finish = "length" if matched is None and len(out.token_ids) >= max_tokens else "stop"
            return Completion(text=text, n_tokens=len(out.token_ids), finish_reason=finish)

        rows = await asyncio.gather(*(asyncio.gather(*(one(p) for _ in range(n))) for p in prefixes))
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
        im_end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        if k < self.n_regular or self.n_dbs == 0:
            if group["arrivals"] >= self.n_regular + self.n_dbs:
                _GROUPS.pop(key, None)
            params = {**sampling_params, "stop": self.final_stop, "include_stop_str_in_output": True, "logprobs": False}
            out = await self.server_manager.generate(
                request_id=uuid4().hex, prompt_ids=prompt_ids, sampling_params=params
            )
            return self._output(prompt_ids, list(out.token_ids), {"dbs": 0})
        if group["task"] is None:
            from codethinker.contra.tracer import Flow
            from codethinker.contra.validate import prefix_score

            flow = Flow.from_json(kwargs["reward_model"]["ground_truth"])
            cfg = DBSConfig(
                budget=self.n_dbs,
                max_tokens=self.response_length,
                block_stop=self.block_stop,
                final_stop=self.final_stop,
                temperature=float(sampling_params.get("temperature", 1.0)),
                max_rounds=self.max_rounds,
            )
            cont = functools.partial(self._continue, prompt_ids, dict(sampling_params))
            group["task"] = asyncio.ensure_future(
                dbs_sample_async(cont, [""], [functools.partial(prefix_score, flow=flow)], cfg)
            )
        [res] = await group["task"]
        j = k - self.n_regular
        group["taken"] += 1
        if group["taken"] >= self.n_dbs:
            _GROUPS.pop(key, None)
        c = res.completions[j]
        ids = self.tokenizer.encode(c.text, add_special_tokens=False)
        if c.finish_reason == "stop":
            ids.append(im_end)
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
