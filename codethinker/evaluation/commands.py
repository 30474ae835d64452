"""``codethinker eval`` and ``codethinker report`` (wired into :mod:`codethinker.cli`).

    codethinker eval --model models/base --bench cruxeval --bench reval --runs 5 --limit 50
    codethinker eval --model Qwen/Qwen2.5-Coder-7B-Instruct --bench CRUXEval-O --format vanilla
    codethinker eval --model models/base --adapter models/sft/adapter --bench REval-FO
    codethinker eval --model models/sft/merged --bench humaneval,mbpp+,gsm8k --runs 1 --limit 20
    codethinker report [--source metrics|mlflow] [--exps exps.json] [--out docs/results.md]

Expected problems (an unknown benchmark, a missing model folder, an unreadable metrics file)
raise :class:`~codethinker.errors.UsageError`, which the CLI prints as one line with exit code 2. LiveCodeBench-O
without the Hugging Face hub is skipped with a message, not an error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from codethinker.errors import UsageError
from codethinker.evaluation.harness import FORMATS, EvalConfig, ModelSpec

__all__ = ["add_eval_arguments", "add_report_arguments", "run_eval", "run_report"]


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="HF model id or local folder (base, merged SFT/GRPO output)")
    p.add_argument(
        "--bench",
        action="append",
        required=True,
        help="cruxeval | reval | livecodebench (or CRUXEval-O, REval-FO, LCB-O), or a generalization benchmark: "
        "cruxeval-i | reval-co | reval-c | reval-p | reval-s | cruxeval-x (its 19 languages) | cruxeval-x-<lang> | "
        "humaneval | humaneval+ | mbpp | mbpp+ | gsm8k | gsm-hard | math500 | lcb-cg; repeat or comma-separate "
        "(--runs is the samples per problem there)",
    )
    p.add_argument("--adapter", help="LoRA adapter folder to apply on top of --model")
    p.add_argument(
        "--format",
        choices=list(FORMATS),
        default="contra",
        help="zero-shot ConTra prompt (default), the bare ConTra prompt of a from-scratch policy "
        "(contra-bare), or the CRUXEval-style `assert f(x) == ??` prompt (vanilla)",
    )
    p.add_argument("--runs", type=int, default=5, help="sampled runs, seeds seed..seed+runs-1 (default 5)")
    p.add_argument("--limit", type=int, help="first N traced samples per benchmark (default: all)")
    p.add_argument("--temperature", type=float, default=0.2, help="sampling temperature (default 0.2)")
    p.add_argument("--max-tokens", type=int, default=1024, help="generation limit per answer (default 1024)")
    p.add_argument("--seed", type=int, default=0, help="seed of run 0 (default 0)")
    p.add_argument("--backend", choices=["vllm", "hf"], default="vllm", help="generation engine (default vllm)")
    p.add_argument("--dtype", default=None, help="model dtype for the engine (default: the engine's choice)")
    p.add_argument("--max-model-len", type=int, default=None, help="vLLM context length (default 4096)")
    p.add_argument("--eager", action="store_true", help="vLLM: skip torch.compile (faster start on CPU)")
    p.add_argument("--name", help="label for tables and the output folder (default: the model folder's name)")
    p.add_argument("--mirror", help="data mirror folder (default: $CODETHINKER_MIRROR or base.mirror of params.yaml)")
    p.add_argument("--out", help="output folder (default: eval_out/<name>)")


def add_report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--source",
        choices=["metrics", "mlflow"],
        default="metrics",
        help="metrics/eval/<model>/<bench>.json files (default) or MLflow runs tagged eval.model",
    )
    p.add_argument("--metrics-dir", default="metrics/eval", help="folder of the evaluate stage's metrics")
    p.add_argument(
        "--general-dir", default="metrics/generalize", help="folder of the generalize stage's metrics (Table 4)"
    )
    p.add_argument("--exps", help="JSON of `dvc exp show --json` for Table 2; `auto` runs that command here")
    p.add_argument("--params", default="params.yaml", help="params file used to spell the ablation commands")
    p.add_argument("--note", help="a paragraph printed under the title (e.g. which profile the runs used)")
    p.add_argument("--out", help="write the Markdown here (default: stdout)")


def _mirror(arg: str | None) -> Path | None:
    from codethinker.params import ParamsError, load_params, mirror_root

    if arg:
        if not Path(arg).is_dir():
            raise UsageError(f"mirror folder not found: {arg}")
        return Path(arg)
    try:
        base = load_params().get("base", {}) if Path("params.yaml").is_file() else {}
    except ParamsError:
        base = {}
    return mirror_root(base)


def _bench_names(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """``--bench`` split into the generalization benchmarks and the canonical names of the others."""
    from codethinker.evaluation import benchmarks as bm
    from codethinker.evaluation import generalize as gz

    raw = list(dict.fromkeys(b.strip() for arg in args.bench for b in arg.split(",") if b.strip()))
    general = [b.lower() for b in raw if gz.known(b)]
    try:
        names = list(dict.fromkeys(bm.canonical_name(b) for b in raw if not gz.known(b)))
    except ValueError as exc:
        raise UsageError(f"{exc}; or a generalization benchmark: {', '.join(gz.NAMES)}") from None
    return general, names


def _eval_setup(args: argparse.Namespace) -> tuple[EvalConfig, ModelSpec]:
    """The sampling config and the model of ``eval``; :class:`UsageError` when either is wrong."""
    from codethinker.evaluation.harness import model_problem

    try:
        config = EvalConfig(
            runs=args.runs, temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed, limit=args.limit
        )
        spec = ModelSpec(args.name or Path(args.model.rstrip("/")).name, args.model, args.adapter, args.format)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if problem := model_problem(spec):
        raise UsageError(problem)
    return config, spec


def _prepare_benches(names: list[str], mirror: Path | None) -> dict:
    """Each benchmark's samples, or the message why it is skipped here (printed)."""
    from codethinker.data.io import RecordError
    from codethinker.data.sources import SourceError
    from codethinker.evaluation import benchmarks as bm

    benches: dict = {}
    for name in names:
        try:
            benches[name] = bm.prepare(name, mirror)
        except bm.BenchmarkUnavailable as exc:
            print(str(exc), file=sys.stderr)
            benches[name] = str(exc)
        except (SourceError, RecordError) as exc:
            raise UsageError(str(exc)) from None
    return benches


def _evaluate_tracked(args: argparse.Namespace, spec: ModelSpec, config: EvalConfig, benches: dict, out: Path) -> dict:
    """Evaluate ``spec`` on ``benches`` inside the ``eval`` run: tags, metrics per benchmark, the metrics
    folder as an artifact; predictions and metrics written under ``out``."""
    from codethinker.evaluation.harness import evaluate_model
    from codethinker.ops.runs import stage_run  # the CLI layer: ops may be imported here

    options = _engine_options(args)
    with stage_run("eval", {"model": asdict(spec), "config": asdict(config), "backend": args.backend}) as run:
        run.set_tags({"eval.model": spec.name, "eval.path": spec.model, "eval.format": spec.format})
        try:
            results = evaluate_model(
                spec,
                benches,
                config,
                backend=args.backend,
                engine_options=options,
                pred_dir=out / "predictions",
                metrics_dir=out / "metrics",
                log=lambda s: None,
            )
        except OSError as exc:  # a hub id that cannot be downloaded, an unreadable model folder
            raise UsageError(f"cannot load {spec.model}: {exc}") from None
        for bench, m in results.items():
            if not m.get("skipped"):
                run.log_metrics({f"{bench}.{k}": v for k, v in m.items() if isinstance(v, int | float)})
        run.log_artifact(out / "metrics", "metrics")
    return results


def run_eval(args: argparse.Namespace) -> int:
    from codethinker.evaluation.harness import one_line

    general, names = _bench_names(args)
    config, spec = _eval_setup(args)
    mirror = _mirror(args.mirror)
    out = Path(args.out or Path("eval_out") / spec.name)
    if general:
        _run_general(args, spec, general, mirror, out)
    if not names:
        return 0
    results = _evaluate_tracked(args, spec, config, _prepare_benches(names, mirror), out)
    for m in results.values():
        print(one_line(m))
    print(f"predictions and metrics in {out}/", file=sys.stderr)
    return 0


def _engine_options(args: argparse.Namespace) -> dict:
    options = {"dtype": args.dtype, "max_model_len": args.max_model_len}
    if args.backend == "vllm" and args.eager:
        options["enforce_eager"] = True
    return options


def _run_general(args: argparse.Namespace, spec: ModelSpec, names: list[str], mirror: Path | None, out: Path) -> None:
    """The generalization benchmarks of ``--bench`` (:mod:`codethinker.evaluation.generalize`)."""
    from codethinker.data.io import RecordError
    from codethinker.data.sources import SourceError
    from codethinker.evaluation.generalize import GenConfig, run_benchmarks
    from codethinker.evaluation.harness import close_engine, open_engine
    from codethinker.ops.runs import stage_run  # the CLI layer: ops may be imported here

    try:
        config = GenConfig(
            n=args.runs, temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed, limit=args.limit
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    with stage_run("eval-generalize", {"model": asdict(spec), "config": asdict(config)}) as run:
        try:
            engine = open_engine(spec, args.backend, **_engine_options(args))
        except OSError as exc:
            raise UsageError(f"cannot load {spec.model}: {exc}") from None
        try:
            results = run_benchmarks(
                engine,
                names,
                config,
                mirror=mirror,
                cache_dir=Path("data/downloads"),
                pred_dir=out / "predictions",
                metrics_dir=out / "metrics",
                extra={"model": asdict(spec)},
                log=print,
            )
        except (SourceError, RecordError, ValueError) as exc:
            raise UsageError(str(exc)) from None
        finally:
            close_engine(engine)
        for bench, m in results.items():
            if "skipped" not in m:
                run.log_metrics({f"{bench}.{k}": v for k, v in m.items() if isinstance(v, int | float)})


def run_report(args: argparse.Namespace) -> int:
    from codethinker.evaluation import report

    try:
        if args.source == "mlflow":
            results = report.from_mlflow()
        else:
            if not Path(args.metrics_dir).is_dir():
                raise UsageError(f"no metrics folder {args.metrics_dir} (run `dvc repro` or `codethinker eval`)")
            results = report.from_metrics_dir(args.metrics_dir)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not results:
        raise UsageError(f"no evaluation results in {args.source} (run `dvc repro` or `codethinker eval` first)")
    exps, raw = None, None
    if args.exps == "auto":
        from codethinker.ops.dvc_api import exp_show_json

        raw = exp_show_json()
    elif args.exps:
        if not Path(args.exps).is_file():
            raise UsageError(f"experiments file not found: {args.exps}")
        raw = Path(args.exps).read_text()
    micro = codegen = None
    if raw is not None:
        from codethinker.evaluation import codegen_report, micro_table

        try:
            exps = report.from_dvc_exps(raw)
            micro = micro_table.collect(raw)
            codegen = codegen_report.collect(raw)
        except (json.JSONDecodeError, TypeError, AttributeError) as exc:
            raise UsageError(f"{args.exps}: not the JSON of `dvc exp show --json` ({exc})") from None
    params = None
    if args.params and Path(args.params).is_file():
        from codethinker.params import load_yaml

        params = load_yaml(Path(args.params).read_text())
    from codethinker.evaluation import general_report

    try:
        general = general_report.from_dir(args.general_dir)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    text = report.render_report(
        results, exps, params=params, note=args.note, micro=micro, general=general, codegen=codegen
    )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(f"use the `codethinker` command ({os.path.basename(__file__)} is a library module)")
