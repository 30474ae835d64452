"""Evaluation harness: prompts, generation over ``runs`` seeds, judging, metrics (SPEC §7).

Any :class:`~codethinker.engines.base.Engine` goes through the same code path: vLLM (CPU or
CUDA build), transformers' generate, an OpenAI-compatible server, or a scripted engine in tests.

Judging, per generation (model text is never executed; literals are read with
``ast.literal_eval`` under size caps):

- **pass@1** is judged like the public harnesses (CRUXEval's and LiveCodeBench's
  ``assert <true output> == <prediction>``): the prediction is the right side of the assertion in
  the last ``[RETURN]`` group (ConTra) or ``[ANSWER]`` group (vanilla), or the whole group when it
  has no ``==``; it counts when ``true_output == prediction`` in Python (so ``1 == True == 1.0``
  and a tuple is not a list). The strict format is *not* required for it (the public harnesses
  only extract the answer); ``pass1_strict`` is the reward's check instead: valid format and the
  type-strict equality of SPEC §3.
- **RCS** (ConTra only): ``crm_score(text, flow).rcs``, the share of blocks before the first
  wrong LOCALS, 0 when the format is broken.
- **format-valid rate**: the strict ConTra validator, or the vanilla ``[THOUGHT]``/``[ANSWER]``
  parser. **Thinking depth**: generated tokens per answer.

pass@1 is computed per run (seed ``seed + r``) over the traced samples; the metrics file holds
the mean and the sample standard deviation over runs.
"""

from __future__ import annotations

import ast
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codethinker.contra.render import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    RETURN_CLOSE,
    RETURN_OPEN,
    TRACE_CLOSE,
    last_group,
    render_prompt,
    vanilla_prompt,
)
from codethinker.contra.validate import MAX_LITERAL_CHARS
from codethinker.contra.values import parse_literal, strict_equal
from codethinker.data.io import write_json, write_jsonl
from codethinker.engines.base import Engine
from codethinker.evaluation.benchmarks import DISPLAY, PAPER_COUNTS, Sample, TracedBenchmark
from codethinker.rewards.crm import crm_score
from codethinker.rewards.orm import parse_vanilla

__all__ = [
    "FORMATS",
    "EvalConfig",
    "ModelSpec",
    "evaluate_model",
    "evaluate_samples",
    "extract_answer",
    "harness_equal",
    "judge",
    "model_problem",
    "open_engine",
    "prompt_messages",
    "summarize",
]

# contra: zero-shot ConTra (the format explained); contra-bare: the code and the call only, as the
# from-scratch micro policy was trained (contra_sft.prompt: bare); vanilla: CRUXEval's assertion.
FORMATS = ("contra", "contra-bare", "vanilla")
STOP = {"contra": [TRACE_CLOSE], "contra-bare": [TRACE_CLOSE], "vanilla": [ANSWER_CLOSE]}
ANSWER_GROUP = {
    "contra": (RETURN_OPEN, RETURN_CLOSE),
    "contra-bare": (RETURN_OPEN, RETURN_CLOSE),
    "vanilla": (ANSWER_OPEN, ANSWER_CLOSE),
}


@dataclass(frozen=True)
class ModelSpec:
    """One model to evaluate."""

    name: str = field(metadata={"help": "label in tables and in metrics/eval/<name>/ (e.g. base, sft, grpo)"})
    model: str = field(metadata={"help": "HF model id or local folder (a base, or a merged SFT/GRPO output)"})
    adapter: str | None = field(default=None, metadata={"help": "LoRA adapter folder applied on top of `model`"})
    format: str = field(
        default="contra", metadata={"help": "prompt format: contra (zero-shot ConTra) | contra-bare | vanilla"}
    )

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {self.format!r}")


@dataclass(frozen=True)
class EvalConfig:
    """Sampling and size settings shared by every model of one evaluation."""

    runs: int = field(default=5, metadata={"help": "sampled runs (seeds seed..seed+runs-1); the paper used 5"})
    temperature: float = field(default=0.2, metadata={"help": "sampling temperature of every run"})
    max_tokens: int = field(default=4096, metadata={"help": "generation limit per answer (thinking + answer)"})
    seed: int = field(default=0, metadata={"help": "seed of run 0; run r uses seed + r"})
    limit: int | None = field(default=None, metadata={"help": "first N traced samples per benchmark (None: all)"})
    batch_size: int = field(default=512, metadata={"help": "prompts per engine call (the engine batches inside)"})

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ValueError("runs must be >= 1")
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if self.limit is not None and self.limit < 1:
            raise ValueError("limit must be >= 1 or null")
        if self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")


def open_engine(spec: ModelSpec, backend: str = "vllm", *, params_at: str | None = None, **options: Any) -> Engine:
    """An engine for ``spec`` (:func:`codethinker.engines.open_engine` with its model and adapter);
    ``params_at``: the params section the options come from (e.g. ``evaluate.engine``), named when
    the KV cache cannot be had."""
    from codethinker import engines

    return engines.open_engine(spec.model, backend, spec.adapter, kv_params=params_at, **options)


def model_problem(spec: ModelSpec) -> str | None:
    """Why ``spec`` cannot be loaded (a missing local folder), or None. A string with one ``/``
    whose first part is not a local folder is taken as a Hugging Face hub id."""
    for what, ref in (("model", spec.model), ("adapter", spec.adapter)):
        if ref is None or Path(ref).exists():
            continue
        head = ref.split("/")[0]
        hub_like = (
            what == "model" and ref.count("/") == 1 and not ref.startswith((".", "/")) and not Path(head).is_dir()
        )
        if not hub_like:
            return f"{what} folder not found: {ref}"
    return None


def close_engine(engine: Any) -> None:
    close = getattr(engine, "close", None)
    if callable(close):
        close()


def prompt_messages(sample: Sample, fmt: str) -> list[dict[str, str]]:
    """Both formats show the same normalized program (the one the LINENOs number)."""
    flow = sample.flow
    if fmt in ("contra", "contra-bare"):
        return render_prompt(flow, "bare" if fmt == "contra-bare" else "instruct")
    return vanilla_prompt("\n".join(flow.lines), flow.entry, flow.input)


def _right_side(body: str) -> str:
    try:
        tree = ast.parse(body)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        tree = None
    if tree is not None and len(tree.body) == 1:
        node = tree.body[0]
        test = node.test if isinstance(node, ast.Assert) else getattr(node, "value", None)
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            return ast.get_source_segment(body, test.comparators[0]) or ""
    return body.split("==", 1)[1] if "==" in body else body


def extract_answer(text: str, fmt: str) -> tuple[bool, Any]:
    """``(found, literal)``: the predicted output, read without executing anything."""
    body = last_group(text, *ANSWER_GROUP[fmt], MAX_LITERAL_CHARS)
    if body is None:
        return False, None
    try:
        return True, parse_literal(_right_side(body).strip(), MAX_LITERAL_CHARS)
    except ValueError:
        return False, None


def harness_equal(truth: Any, prediction: Any) -> bool:
    """The public harnesses' check, ``assert truth == prediction``, on two literals."""
    try:
        return bool(truth == prediction)
    except Exception:
        return False


def judge(text: str, sample: Sample, fmt: str) -> dict[str, Any]:
    """Score one generation: ``answered, pass, pass_strict, fmt, rcs, reason``."""
    flow = sample.flow
    found, prediction = extract_answer(text, fmt)
    passed = found and harness_equal(flow.output, prediction)
    if fmt in ("contra", "contra-bare"):
        s = crm_score(text, flow)
        fmt_ok, rcs, strict, reason = s.fmt, float(s.rcs), s.answer_ok, s.reason
    else:
        ok, answer, reason = parse_vanilla(text, flow.entry)
        fmt_ok, rcs, strict = int(ok), None, int(ok and strict_equal(answer, flow.output))
    return {
        "answered": int(found),
        "pass": int(passed),
        "pass_strict": int(strict),
        "fmt": int(fmt_ok),
        "rcs": rcs,
        "reason": reason,
    }


def evaluate_samples(
    engine: Engine,
    samples: Sequence[Sample],
    fmt: str,
    config: EvalConfig,
    *,
    on_batch: Callable[[int, int], None] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, float]]]:
    """Generate ``config.runs`` answers per sample and judge them.

    Returns one record per (sample, run) and one timing row per run (``seconds``, ``tokens``).
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    prompts = [engine.apply_chat_template(prompt_messages(s, fmt)) for s in samples]
    records: list[dict[str, Any]] = []
    timing: list[dict[str, float]] = []
    for run in range(config.runs):
        seed = config.seed + run
        seconds, tokens = 0.0, 0
        for lo in range(0, len(prompts), config.batch_size):
            batch = prompts[lo : lo + config.batch_size]
            t0 = time.perf_counter()
            outs = engine.continue_prefixes(
                batch, 1, stop=STOP[fmt], max_tokens=config.max_tokens, temperature=config.temperature, seed=seed
            )
            seconds += time.perf_counter() - t0
            if len(outs) != len(batch):
                raise RuntimeError(f"engine returned {len(outs)} results for {len(batch)} prompts")
            for s, comps in zip(samples[lo : lo + len(batch)], outs, strict=True):
                c = comps[0]
                tokens += c.n_tokens
                rec = {"id": s.id, "run": run, "seed": seed, **judge(c.text, s, fmt)}
                rec.update({"tokens": c.n_tokens, "finish": c.finish_reason, "text": c.text})
                records.append(rec)
            if on_batch:
                on_batch(run, lo + len(batch))
        timing.append({"seconds": seconds, "tokens": tokens})
    return records, timing


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _std(xs: Sequence[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def summarize(
    records: Sequence[dict[str, Any]],
    timing: Sequence[dict[str, float]],
    *,
    benchmark: str,
    spec: ModelSpec,
    config: EvalConfig,
    n_problems: int,
    untraced: Sequence[dict[str, str]] = (),
) -> dict[str, Any]:
    """The metrics file of one model on one benchmark (rates are fractions in [0, 1])."""
    runs = sorted({r["run"] for r in records})
    by_run = {k: [r for r in records if r["run"] == k] for k in runs}

    def per_run(key: str) -> list[float]:
        return [m for k in runs if (m := _mean([r[key] for r in by_run[k] if r[key] is not None])) is not None]

    pass_runs, strict_runs, rcs_runs = per_run("pass"), per_run("pass_strict"), per_run("rcs")
    tokens = [r["tokens"] for r in records]
    seconds = sum(t["seconds"] for t in timing)
    n_samples = len(by_run[runs[0]]) if runs else 0
    return {
        "benchmark": benchmark,
        "display": DISPLAY.get(benchmark, benchmark),
        "model": asdict(spec),
        "config": asdict(config),
        "n_problems": n_problems,
        "paper_count": PAPER_COUNTS.get(benchmark),
        "n_samples": n_samples,
        "untraceable": len(untraced),
        "untraceable_examples": list(untraced[:20]),
        "runs": len(runs),
        "pass1_mean": _mean(pass_runs),
        "pass1_std": _std(pass_runs),
        "pass1_runs": pass_runs,
        "pass1_strict_mean": _mean(strict_runs),
        "rcs_mean": _mean(rcs_runs) if rcs_runs else None,
        "rcs_std": _std(rcs_runs) if rcs_runs else None,
        "fmt_rate": _mean([r["fmt"] for r in records]),
        "answer_rate": _mean([r["answered"] for r in records]),
        "tokens_mean": _mean(tokens),
        "truncated_rate": _mean([int(r["finish"] == "length") for r in records]),
        "gen_seconds": seconds,
        "tokens_per_s": (sum(tokens) / seconds) if seconds > 0 else None,
    }


def skipped_metrics(benchmark: str, spec: ModelSpec, config: EvalConfig, why: str) -> dict[str, Any]:
    return {
        "benchmark": benchmark,
        "display": DISPLAY.get(benchmark, benchmark),
        "model": asdict(spec),
        "config": asdict(config),
        "paper_count": PAPER_COUNTS.get(benchmark),
        "n_samples": 0,
        "skipped": why,
    }


def one_line(m: dict[str, Any]) -> str:
    """A one-line summary of a metrics dict (for logs and the CLI)."""
    head = f"{m['model']['name']} {m['display']}"
    if m.get("skipped"):
        return f"{head}: {m['skipped']}"
    rcs = "n/a" if m["rcs_mean"] is None else f"{m['rcs_mean']:.3f}"
    return (
        f"{head}: pass@1 {100 * m['pass1_mean']:.2f} ± {100 * m['pass1_std']:.2f} % ({m['runs']} runs), "
        f"RCS {rcs}, format {100 * m['fmt_rate']:.1f} %, {m['tokens_mean']:.0f} tokens/answer, "
        f"{m['n_samples']} samples ({m['untraceable']} untraceable), {m['gen_seconds']:.0f} s"
    )


def evaluate_model(
    spec: ModelSpec,
    benches: Mapping[str, TracedBenchmark | str],
    config: EvalConfig,
    *,
    engine: Engine | None = None,
    backend: str = "vllm",
    engine_options: Mapping[str, Any] | None = None,
    engine_params_at: str | None = None,
    pred_dir: str | os.PathLike[str] | None = None,
    metrics_dir: str | os.PathLike[str] | None = None,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
    progress: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Evaluate one model on every benchmark (a ``str`` value: the benchmark is skipped, with that
    message); write ``<pred_dir>/<bench>.jsonl`` and ``<metrics_dir>/<bench>.json``. The engine is
    opened here (and closed) unless one is given; ``engine_params_at`` names the params section of
    ``engine_options`` in its errors (e.g. ``evaluate.engine``). ``progress``: a bar with this label over
    the engine's start and the benchmarks (the log lines then go above it)."""
    from tqdm.auto import tqdm

    results: dict[str, dict[str, Any]] = {}
    own = engine is None and any(not isinstance(b, str) for b in benches.values())
    bar = tqdm(total=len(benches) + own, desc=progress, unit="step", file=sys.stderr, disable=progress is None)
    say = (lambda s: bar.write(s, file=sys.stderr)) if progress is not None else log
    load_s = 0.0
    if own:
        bar.set_postfix_str("engine")
        t0 = time.perf_counter()
        engine = open_engine(spec, backend, params_at=engine_params_at, **dict(engine_options or {}))
        load_s = time.perf_counter() - t0
        say(f"{spec.name}: {backend} engine for {spec.model} ready in {load_s:.0f} s")
        bar.update()
    try:
        for name, bench in benches.items():
            bar.set_postfix_str(name)
            if isinstance(bench, str):
                m = skipped_metrics(name, spec, config, bench)
            else:
                samples = bench.samples[: config.limit] if config.limit else bench.samples
                assert engine is not None
                records, timing = evaluate_samples(engine, samples, spec.format, config)
                m = summarize(
                    records,
                    timing,
                    benchmark=name,
                    spec=spec,
                    config=config,
                    n_problems=bench.n_problems,
                    untraced=bench.untraced,
                )
                m["engine"] = {"backend": backend, "load_seconds": load_s, **dict(engine_options or {})}
                if (kv := getattr(engine, "kv_cache_info", None)) is not None:
                    m["engine"]["kv_cache"] = kv  # what vLLM made of it: blocks, tokens, bytes
                if pred_dir is not None:
                    write_jsonl(Path(pred_dir) / f"{name}.jsonl", records)
            if metrics_dir is not None:
                write_json(Path(metrics_dir) / f"{name}.json", m)
            results[name] = m
            say(one_line(m))
            bar.update()
    finally:
        bar.close()
        if own:
            close_engine(engine)
    return results
