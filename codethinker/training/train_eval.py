"""Before SFT / after SFT / after GRPO on held-out GRPO prompts: format-valid rate, mean reward,
RCS, answer accuracy, the share of answers cut by the token limit and mean response tokens
(one greedy response per prompt unless ``samples`` > 1), each with a 95% bootstrap interval over
prompts, reported per held-out set (``shape_disjoint``: generated programs whose shapes never train;
``in_distribution``: generated programs of shapes that do; ``leetcode``: held-out LeetCode functions; a row
written without a set is counted under its source), and the paired interval of the reward change after
GRPO vs after SFT.

The task (``task``, :mod:`codethinker.tasks`), the reward and the prompt format are the ones GRPO trained with
(output prediction's ``reward``: ``crm`` with the row's ConTra prompt, ``orm`` with the vanilla prompt,
``whitebox`` with the white-box prompt; :mod:`codethinker.rewards.switch`), for all three phases, so the paired
GRPO - SFT change compares like with like; the result names them (``reward_kind``, ``prompt_format``). For ``crm``
the score is the full CRM whatever ``grpo.crm`` ablated (this section's own ``crm`` switches, none by default), so
the ablations are measured alike. ``rcs`` is the ConTra consistency of the answer for every reward (0 for an answer
that is no ConTra trace).

The response limit ``max_tokens: auto`` is the task's budget (:meth:`Task.budget
<codethinker.tasks.base.Task.budget>`) per source; for output prediction the longest ground-truth trace among
that source's evaluated prompts in the model's tokens (with the template teacher's thoughts, or empty ones for a
policy trained on ``contra_sft.teacher: none``), x 1.25; so short generated programs are not given LeetCode's
limit. ``max_prompts`` caps each set (a number for
all, or ``{set: n}``), its prompts taken one function at a time (the first input of each function, then
the second, ...), so 30 LeetCode prompts are 30 functions where the set has them.

Models are evaluated one after another, so only one is in memory at a time: vLLM (where it runs) starts
once and takes each next model's weights in place when that model has the same architecture and tokenizer
(:func:`swappable`: the micro policy before SFT, after SFT and after GRPO; about 30 s less per model
than a fresh engine on CPU); other models, and transformers' generate, get a fresh engine each.

>>> run_train_eval({"before_sft": "models/base"}, rows, EvalParams())  # doctest: +SKIP
{'before_sft': {'fmt_rate': 0.0, 'reward': 0.0, 'rcs': 0.0, 'answer_acc': 0.0, 'response_tokens': 256.0, ...}}
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["EvalParams", "evaluate_engine", "open_eval_engine", "run_train_eval", "swappable"]

MAX_SEQS = 256  # vLLM's CPU default for max_num_seqs: the most sequences an engine runs at once
HF_BATCH = 64  # prompts per generate call of the transformers engine


@dataclass
class EvalParams:
    max_prompts: int | dict[str, int] | None = field(
        default=None, metadata={"help": "first N held-out prompts of each set, or {set: N} (None: all)"}
    )
    max_tokens: int | str = field(
        default=4096,
        metadata={"help": "response length limit; auto: per source, 1.25 x the longest ground-truth trace"},
    )
    temperature: float = field(default=0.0, metadata={"help": "0: greedy"})
    samples: int = field(default=1, metadata={"help": "responses per prompt"})
    sampled_samples: int = field(
        default=0,
        metadata={
            "help": "a second pass: this many answers per prompt at sampled_temperature, each metric their mean per "
            "prompt, reported as sampled_<metric> (the policy's expected score, what GRPO raises); 0: none"
        },
    )
    sampled_temperature: float | None = field(
        default=None, metadata={"help": "the second pass's temperature (None: GRPO's rollout temperature)"}
    )
    sampled_phases: list[str] | None = field(
        default_factory=lambda: ["after_sft", "after_grpo"],
        metadata={
            "help": "the phases (models' names) that get the second pass (None: all; the random model before SFT "
            "writes to the limit and scores 0)"
        },
    )
    engine: str = field(default="auto", metadata={"help": "vllm | hf | auto"})
    max_model_len: int = field(default=4096, metadata={"help": "vLLM context"})
    kv_cache_gib: float | str | None = field(
        default="auto",
        metadata={
            "help": "KV cache of the vLLM CPU build, in GiB: auto = room for every prompt x samples at once "
            "(at most 256 sequences) of max_model_len tokens (from the model's config.json, +20%, >= 0.25 GiB); "
            "a number = that many; null = vLLM's share of RAM (0.15). Not used on a GPU"
        },
    )
    trace_thoughts: bool = field(
        default=True,
        metadata={"help": "the policy writes thoughts (contra_sft.teacher != none): sizes max_tokens auto"},
    )
    task: str = field(
        default="output_prediction", metadata={"help": "the task GRPO trained (grpo.task; codethinker.tasks)"}
    )
    reward: str = field(
        default="crm",
        metadata={"help": "the reward and prompt format GRPO trained with (output prediction: crm | orm | whitebox)"},
    )
    crm: dict[str, Any] = field(default_factory=dict, metadata={"help": "CRM switches (reward crm; {}: full CRM)"})
    whitebox: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "white-box reward a, k (reward whitebox; as in grpo)"}
    )
    seed: int = field(default=0, metadata={"help": "sampling seed"})
    trained_prompts: int = field(default=0, metadata={"help": "also score GRPO's first N prompts as the set trained"})

    def __post_init__(self) -> None:
        from codethinker.engines.kv_cache import parse_kv_setting

        parse_kv_setting(self.kv_cache_gib, "train_eval.kv_cache_gib")
        if self.trained_prompts < 0:
            raise ValueError(f"train_eval.trained_prompts must be >= 0, got {self.trained_prompts}")
        self.reward_spec()  # a misspelled reward or setting stops here

    def reward_spec(self) -> Any:
        """The task's reward the answers are scored with (its settings: this section's ``crm`` and ``whitebox``
        where the task reads them)."""
        from codethinker.tasks import get_task

        task = get_task(self.task)
        return task.reward_spec(self.reward, {k: getattr(self, k, None) for k in task.settings})

    def kv_params(self) -> Any:
        """The params a vLLM KV-cache error names."""
        from codethinker.engines.kv_cache import KVParamNames

        return KVParamNames(
            "train_eval.kv_cache_gib",
            ("train_eval.max_prompts", "train_eval.max_model_len"),
            "train_eval.max_model_len",
        )


METRICS = ("fmt_rate", "reward", "rcs", "answer_acc", "truncated", "response_tokens")


def source_of(row: dict[str, Any]) -> str:
    """The row's held-out set (``shape_disjoint``, ``in_distribution``, ``leetcode``), else its source
    (``synth`` / ``leetcode``); rows written before sources existed are LeetCode."""
    return str(row.get("heldout") or row.get("source", "leetcode"))


def by_source(rows: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Row indices per source, in first-seen order."""
    out: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        out.setdefault(source_of(r), []).append(i)
    return out


Answers = Callable[[dict[str, Any]], None]  # receives every scored answer (:func:`score_prompts`)


def score_prompts(
    engine: Any, rows: list[dict[str, Any]], p: EvalParams, max_tokens: int, answers: Answers | None = None
) -> list[dict[str, float]]:
    """One dict of :data:`METRICS` per prompt (the mean over its ``samples`` answers), every answer scored in one
    call of the task (:meth:`Task.score <codethinker.tasks.base.Task.score>`) with ``p``'s reward; the rows'
    prompts must be in its format (:func:`run_train_eval` sees to it). ``answers`` receives each answer: the
    prompt's ``id`` and ``set``, its index ``k``, its ``text`` and its score's parts (``fmt``, ``r_proc``,
    ``r_res``, ``reward``, ``rcs``, ``answer_ok``, ``finish``, ``tokens``)."""
    from codethinker.tasks import get_task

    spec = p.reward_spec()
    prompts = [engine.apply_chat_template(r["prompt"]) for r in rows]
    outs = engine.continue_prefixes(
        prompts, p.samples, stop=spec.stop, max_tokens=max_tokens, temperature=p.temperature, seed=p.seed
    )
    flat = [(row, k, c) for row, comps in zip(rows, outs, strict=True) for k, c in enumerate(comps)]
    judged = iter(get_task(p.task).score(spec, [c.text for _, _, c in flat], [row["truth"] for row, _, _ in flat]))
    per_prompt = []
    for row, comps in zip(rows, outs, strict=True):
        vals = {k: 0.0 for k in METRICS}
        for k, c in enumerate(comps):
            s = next(judged).score
            if answers is not None:
                parts = {f: getattr(s, f) for f in ("fmt", "r_proc", "r_res", "reward", "rcs", "answer_ok")}
                answers(
                    {"id": row["id"], "set": source_of(row), "k": k, "text": c.text, **parts}
                    | {"finish": c.finish_reason, "tokens": c.n_tokens}
                )
            vals["fmt_rate"] += s.fmt
            vals["reward"] += s.reward
            vals["rcs"] += s.rcs
            vals["answer_acc"] += s.answer_ok
            vals["truncated"] += float(c.finish_reason == "length")
            vals["response_tokens"] += c.n_tokens
        per_prompt.append({k: v / max(len(comps), 1) for k, v in vals.items()})
    return per_prompt


def summarize(per_prompt: list[dict[str, float]], seed: int = 0) -> dict[str, float]:
    """Mean and 95% bootstrap interval (over prompts) of every metric."""
    from codethinker.evaluation.stats import bootstrap_ci

    out: dict[str, float] = {"n": len(per_prompt)}
    for k in METRICS:
        out.update(bootstrap_ci([x[k] for x in per_prompt], seed=seed).as_dict(k))
    return out


def evaluate_engine(
    engine: Any,
    rows: list[dict[str, Any]],
    p: EvalParams,
    max_tokens: int | dict[str, int],
    answers: Answers | None = None,
) -> dict[str, Any]:
    """Per source (each with its own limit when ``max_tokens`` is a mapping): the summary of its
    prompts; ``per_prompt`` keeps the raw values, in row order, for paired CIs; ``answers``: as in
    :func:`score_prompts`."""
    t0 = time.time()
    per_prompt: list[dict[str, float]] = [{} for _ in rows]
    out: dict[str, Any] = {}
    for source, idx in by_source(rows).items():
        limit = max_tokens[source] if isinstance(max_tokens, dict) else max_tokens
        scored = score_prompts(engine, [rows[i] for i in idx], p, limit, answers)
        for i, x in zip(idx, scored, strict=True):
            per_prompt[i] = x
        out[source] = summarize(scored, p.seed)
    return {"gen_s": round(time.time() - t0, 1), "per_prompt": per_prompt, **out}


SAMPLED = "sampled_"  # prefix of the second (sampled) pass's metrics


def compare(after: dict[str, Any], before: dict[str, Any], rows: list[dict[str, Any]], seed: int = 0) -> dict:
    """Per source: mean reward change (after - before) on the same prompts, with its paired 95% CI (and
    the same for the sampled pass's metrics where both have them)."""
    from codethinker.evaluation.stats import paired_diff_ci

    out = {}
    keys = ("reward", "fmt_rate", "rcs", "answer_acc")
    sampled = all(SAMPLED + "reward" in x for m in (after, before) for x in m["per_prompt"][:1])
    for source, idx in by_source(rows).items():
        for k in (*keys, *(SAMPLED + k for k in keys if sampled)):
            ci = paired_diff_ci(
                [after["per_prompt"][i][k] for i in idx], [before["per_prompt"][i][k] for i in idx], seed=seed
            )
            out.setdefault(source, {}).update(ci.as_dict(f"{k}_diff"))
    return out


def _one_function_at_a_time(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` reordered: the first row of each function (``task_id``, in first-seen order), then the
    second of each, ...; rows without a function keep their place among the first."""
    rank: dict[str, int] = {}
    keyed = []
    for i, r in enumerate(rows):
        fn = r.get("task_id") or f"\x00{i}"
        keyed.append((rank.get(fn, 0), i, r))
        rank[fn] = rank.get(fn, 0) + 1
    return [r for _, _, r in sorted(keyed, key=lambda t: (t[0], t[1]))]


def select_rows(rows: list[dict[str, Any]], max_prompts: int | dict[str, int] | None) -> list[dict[str, Any]]:
    """The first ``max_prompts`` prompts of each set, one function at a time (a mapping: per set, a set it
    lacks keeps all; None or 0: all)."""
    if not max_prompts:
        return rows
    taken: dict[str, int] = {}
    out = []
    for r in _one_function_at_a_time(rows):
        src = source_of(r)
        cap = max_prompts.get(src) if isinstance(max_prompts, dict) else max_prompts
        if not cap or taken.get(src, 0) < cap:
            taken[src] = taken.get(src, 0) + 1
            out.append(r)
    return out


def open_eval_engine(path: str | Path, p: Any, seqs: int, *, weight_sync: bool = False) -> Any:
    """An engine for ``seqs`` sequences at once (at most :data:`MAX_SEQS`) with ``p``'s engine, context, KV
    cache and seed (``p``: :class:`EvalParams` or any params with those fields and ``kv_params()``);
    ``weight_sync``: a vLLM engine that can take other weights in place (``set_weights``)."""
    from codethinker import engines

    return engines.open_engine(
        path,
        p.engine,
        weight_sync=weight_sync or None,
        max_model_len=p.max_model_len,
        kv_cache_gib=p.kv_cache_gib,
        max_num_seqs=max(1, min(seqs, MAX_SEQS)),
        kv_params=p.kv_params(),
        seed=p.seed,
        batch_size=HF_BATCH,  # transformers' generate only
    )


CONFIG_BOOKKEEPING = ("_name_or_path", "transformers_version", "use_cache")  # nothing vLLM's weights depend on


def swappable(a: str | Path, b: str | Path) -> bool:
    """Whether an engine running model folder ``a`` can sample ``b`` by loading ``b``'s weights in place:
    both local ``save_pretrained`` folders (safetensors) with the same ``config.json`` (bookkeeping keys
    aside, :data:`CONFIG_BOOKKEEPING`), the same tokens (``tokenizer.json``'s vocabulary, merges, added
    tokens, pre-tokenizer and normalizer; a re-saved tokenizer writes the rest differently) and the same
    chat template. A hub id is never swapped (its weights are not in a folder here)."""
    import json

    def config(folder: Path) -> dict[str, Any]:
        cfg = json.loads((folder / "config.json").read_text())
        return {k: v for k, v in cfg.items() if k not in CONFIG_BOOKKEEPING}

    def tokens(folder: Path) -> tuple[Any, ...]:
        tok = json.loads((folder / "tokenizer.json").read_text()) if (folder / "tokenizer.json").is_file() else {}
        model = tok.get("model") or {}
        template = folder / "chat_template.jinja"
        tok_config = folder / "tokenizer_config.json"
        chat = template.read_text() if template.is_file() else None
        if chat is None and tok_config.is_file():
            chat = json.loads(tok_config.read_text()).get("chat_template")
        keys = ("added_tokens", "pre_tokenizer", "normalizer")
        return model.get("vocab"), model.get("merges"), *(tok.get(k) for k in keys), chat

    a, b = Path(a), Path(b)
    if not all((f / "config.json").is_file() and any(f.glob("*.safetensors")) for f in (a, b)):
        return False
    return config(a) == config(b) and tokens(a) == tokens(b)


def sampled_params(p: EvalParams) -> EvalParams:
    """``p`` for the sampled pass: ``sampled_samples`` answers per prompt at ``sampled_temperature`` (None: 1.0)."""
    import dataclasses

    t = 1.0 if p.sampled_temperature is None else p.sampled_temperature
    return dataclasses.replace(p, temperature=t, samples=p.sampled_samples, sampled_samples=0)


def merge_sampled(result: dict[str, Any], sampled: dict[str, Any]) -> None:
    """Put the sampled pass's summaries and per-prompt values beside the main pass's, as ``sampled_<key>``."""
    for source, summary in sampled.items():
        if isinstance(summary, dict) and source in result:
            result[source].update({SAMPLED + k: v for k, v in summary.items() if k != "n"})
    result["per_prompt"] = [
        {**a, **{SAMPLED + k: v for k, v in b.items()}}
        for a, b in zip(result["per_prompt"], sampled["per_prompt"], strict=True)
    ]
    result["gen_s"] = round(result["gen_s"] + sampled["gen_s"], 1)


def _labelled(answers: Answers | None, model: str, kind: str) -> Answers | None:
    return None if answers is None else lambda a: answers({"model": model, "pass": kind, **a})


def _close(engine: Any) -> None:
    if engine is not None and hasattr(engine, "close"):
        engine.close()


def run_train_eval(
    models: dict[str, str | Path], rows: list[dict[str, Any]], p: EvalParams, answers: Answers | None = None
) -> dict[str, Any]:
    """Evaluate each named model in turn on ``rows`` of the task ``p.task`` (their prompts put in the format of
    ``p.reward``; the answer budget ``max_tokens: auto`` is the task's, per held-out set); a
    missing local model folder is reported, not fatal. ``answers`` receives every answer (as in
    :func:`score_prompts`) with its ``model`` (the phase) and ``pass`` (``greedy``, ``sampled``).

    Returns ``{phase: {source: summary}, "grpo_vs_sft": {source: diffs}, "max_tokens": {source: n},
    "reward_kind": kind, "prompt_format": format}``.
    """
    from codethinker.tasks import get_task
    from codethinker.training.grpo_rows import with_reward_prompts

    spec, task = p.reward_spec(), get_task(p.task)
    rows = with_reward_prompts(select_rows(rows, p.max_prompts), spec, task)
    groups = by_source(rows)
    if p.max_tokens == "auto":
        first = next((m for m in models.values() if Path(m).exists() or not str(m).startswith("models/")), None)
        max_tokens = {
            src: task.budget(first, [rows[i] for i in idx], spec, p.trace_thoughts) if first else 1024
            for src, idx in groups.items()
        }
    else:
        max_tokens = dict.fromkeys(groups, int(p.max_tokens))
    out: dict[str, Any] = {"reward_kind": spec.kind, "prompt_format": spec.format, "max_tokens": max_tokens}
    eng, loaded = None, None  # the open engine and the model folder whose weights it holds
    try:
        for name, path in models.items():
            if str(path).startswith(("models/", "./", "/")) and not Path(path).exists():
                out[name] = {"missing": 1.0}
                continue
            if getattr(eng, "weight_sync", False) and swappable(loaded, path):
                eng.set_weights(path)
            else:
                _close(eng)
                eng = None
                eng = open_eval_engine(path, p, len(rows) * max(p.samples, p.sampled_samples), weight_sync=True)
            loaded = path
            out[name] = evaluate_engine(eng, rows, p, max_tokens, _labelled(answers, name, "greedy"))
            if p.sampled_samples and (p.sampled_phases is None or name in p.sampled_phases):
                sampled = evaluate_engine(eng, rows, sampled_params(p), max_tokens, _labelled(answers, name, "sampled"))
                merge_sampled(out[name], sampled)
    finally:
        _close(eng)
    if "per_prompt" in out.get("after_grpo", {}) and "per_prompt" in out.get("after_sft", {}):
        out["grpo_vs_sft"] = compare(out["after_grpo"], out["after_sft"], rows, p.seed)
    for phase in out.values():
        if isinstance(phase, dict):
            phase.pop("per_prompt", None)
    return out
