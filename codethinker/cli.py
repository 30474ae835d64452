"""The ``codethinker`` command line.

    codethinker trace --code prog.py --input '[1, 2], 3'          # ground-truth ConTra trace
    codethinker trace --code prog.py --input 'nums = [2,7], target = 9' --json > truth.json
    codethinker score --rollout out.txt --truth truth.json [--reward crm|orm|whitebox] [--no-gate ...]
    codethinker eval --model models/base --bench cruxeval --bench reval [--adapter DIR] [--format vanilla]
    codethinker report [--source metrics|mlflow] [--exps auto] [--out docs/results.md]

Expected errors (a missing file, code without ``f``, an input that is not valid Python, a
sample that cannot be traced) print one line ``codethinker: error: ...`` and exit with 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["main"]


class CLIError(Exception):
    """An expected error: reported in one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit code 2 through :func:`main`)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CLIError(f"{self.prog}: {message} (see --help)")


def _read(path: str, what: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise CLIError(f"{what} file not found: {path}")
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {what} file {path}: {exc}") from None


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (value > 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def cmd_trace(args: argparse.Namespace) -> int:
    from codethinker.contra.normalize import NormalizeError, normalize_source
    from codethinker.contra.render import render_trace
    from codethinker.contra.tracer import trace
    from codethinker.sandbox import Sandbox, SandboxConfig

    source = _read(args.code, "code")
    try:
        normalize_source(source, args.entry)
    except NormalizeError as exc:
        raise CLIError(f"{args.code}: {exc}") from None
    with Sandbox(SandboxConfig(timeout_s=args.timeout, workers=1)) as sb:
        out = trace(source, args.input, args.entry, sandbox=sb)
    if out.flow is None:
        raise CLIError(f"cannot trace {args.entry}({args.input}): {out.reason}")
    print(out.flow.to_json() if args.json else render_trace(out.flow))
    return 0


def _scorer(args: argparse.Namespace) -> Callable[[str, object], dict]:
    from codethinker.rewards import crm, orm, whitebox

    if args.reward == "orm":
        return orm.orm_score
    if args.reward == "whitebox":
        return whitebox.whitebox_score
    config = crm.CRMConfig(
        prm=not args.no_prm,
        prefix=not args.no_prefix,
        gate=not args.no_gate,
        orm=not args.no_orm,
        ccw=not args.no_ccw,
        alpha=args.alpha,
    )
    return lambda text, flow: crm.crm_score(text, flow, config)


def cmd_score(args: argparse.Namespace) -> int:
    from codethinker.contra.tracer import Flow
    from codethinker.rewards.crm import crm_score

    rollout = _read(args.rollout, "rollout")
    try:
        flow = Flow.from_json(_read(args.truth, "truth"))
    except ValueError as exc:
        raise CLIError(f"{args.truth}: {exc}") from None
    out = dict(_scorer(args)(rollout, flow))
    if args.reward != "crm":  # RCS always measures the ConTra consistency of the rollout
        out["rcs"] = crm_score(rollout, flow)["rcs"]
    print(json.dumps(out))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="codethinker", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    t = sub.add_parser("trace", help="print the ground-truth ConTra trace of f(input)")
    t.add_argument("--code", required=True, help="Python file that defines the function")
    t.add_argument("--input", required=True, help="argument text as inside f(...), e.g. '[1, 2], 3'")
    t.add_argument("--entry", default="f", help="name of the function under test (default: f)")
    t.add_argument("--json", action="store_true", help="print the flow as truth JSON instead")
    t.add_argument("--timeout", type=_positive, default=2.0, help="seconds before the run is stopped")
    t.set_defaults(func=cmd_trace)
    s = sub.add_parser("score", help="score a rollout against a truth JSON")
    s.add_argument("--rollout", required=True, help="text file with the model output")
    s.add_argument("--truth", required=True, help="truth JSON from `codethinker trace --json`")
    s.add_argument("--reward", choices=["crm", "orm", "whitebox"], default="crm")
    for flag, what in [
        ("prm", "process reward"),
        ("prefix", "prefix consistency"),
        ("gate", "the R_proc==2 gate"),
        ("orm", "result reward"),
        ("ccw", "complexity weights"),
    ]:
        s.add_argument(f"--no-{flag}", action="store_true", help=f"CRM ablation: without {what}")
    s.add_argument("--alpha", type=float, default=1.0, help="weight of R_proc (default 1)")
    s.set_defaults(func=cmd_score)
    from codethinker.evaluation.commands import add_eval_arguments, add_report_arguments

    e = sub.add_parser("eval", help="evaluate a model on CRUXEval-O / REval-FO / LCB-O (pass@1, RCS, depth)")
    add_eval_arguments(e)
    e.set_defaults(func=_evaluation("run_eval"))
    r = sub.add_parser("report", help="the paper's tables (Markdown) from evaluation metrics or MLflow runs")
    add_report_arguments(r)
    r.set_defaults(func=_evaluation("run_report"))
    return p


def _evaluation(name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from codethinker.evaluation import commands

        try:
            return getattr(commands, name)(args)
        except commands.CommandError as exc:
            raise CLIError(str(exc)) from None

    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return int(args.func(args))
    except CLIError as exc:
        print(f"codethinker: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
