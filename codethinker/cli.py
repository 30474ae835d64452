"""The ``codethinker`` command line.

    codethinker trace --code prog.py --input '[1, 2], 3'          # ground-truth ConTra trace
    codethinker trace --code prog.py --input 'nums = [2,7], target = 9' --json > truth.json
    codethinker score --rollout out.txt --truth truth.json [--reward crm|orm|whitebox] [--no-gate ...]
    codethinker eval --model models/base --bench cruxeval --bench reval [--adapter DIR] [--format vanilla]
    codethinker report [--source metrics|mlflow] [--exps auto] [--out docs/results.md]
    codethinker preflight [--profile paper] [--params params.yaml] [--show-params]  # ready for a run?
    codethinker repro [dvc repro args]       # `dvc repro` under one MLflow parent run (make run)
    codethinker exp run [dvc exp run args]   # `dvc exp run`, the parent named after the experiment

Expected errors (a missing file, code without ``f``, an input that is not valid Python, a
sample that cannot be traced, a truth JSON of another version or with a field of the wrong type,
a numeric option that is not a finite number in its range) print one line
``codethinker: error: ...`` naming the file and field or the option, and exit with 2. ``score``
prints exactly one line of strict JSON (no ``NaN``/``Infinity``) or nothing. ``preflight`` prints
one line per check of what the profile needs (:mod:`codethinker.preflight`) and exits with 0 when
every check passes, 1 when one fails (2: a params file that is missing or does not resolve).
``repro`` and ``exp run`` pass every argument after them to dvc, open the MLflow parent run, give its id
to the stages as ``$CODETHINKER_PARENT_RUN_ID`` and exit with dvc's exit code
(:func:`codethinker.ops.runs.repro`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from codethinker.errors import CodethinkerError, UsageError, error_line

if TYPE_CHECKING:
    from codethinker.contra.tracer import Flow

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit code 2 through :func:`main`)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see --help)")


def _read(path: str, what: str) -> str:
    """The file's text exactly as its bytes decode (UTF-8, no newline translation): ``score`` scores the
    rollout the library would be given, so a ``\\r\\n`` stays in it as it stays in a response string."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{what} file not found: {path}")
    try:
        return p.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {what} file {path}: {exc}") from None


MAX_TIMEOUT_S = 3600.0
MAX_INT_OPTION = 2**63 - 1


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _float_in(lo: float, hi: float, what: str, *, open_lo: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite float in ``[lo, hi]`` (``(lo, hi]`` with ``open_lo``)."""

    def parse(text: str) -> float:
        value = _finite(text)
        if not (value > lo if open_lo else value >= lo) or value > hi:
            bounds = f"{'(' if open_lo else '['}{lo:g}, {hi:g}]"
            raise argparse.ArgumentTypeError(f"must be {what} in {bounds}, got {text!r}")
        return value

    return parse


def _int_in_range(text: str) -> int:
    """Every int option of this CLI counts or seeds something: 0 <= n < 2**63."""
    if len(text) > 40:  # int() of a long text is quadratic; no count of this CLI is that long
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**63 - 1], got {len(text)} characters")
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value <= MAX_INT_OPTION:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**63 - 1], got {text!r}")
    return value


_positive = _float_in(0.0, MAX_TIMEOUT_S, "a number of seconds", open_lo=True)


def _check_numeric_options(parser: argparse.ArgumentParser) -> None:
    """Give every plain ``float``/``int`` option of every subcommand a checked type (finite floats,
    ints in ``[0, 2**63)``), so no option of any command lets ``nan``, ``inf`` or ``10**400`` in."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _check_numeric_options(sub)
        elif action.type is float:
            action.type = _finite
        elif action.type is int:
            action.type = _int_in_range


def cmd_trace(args: argparse.Namespace) -> int:
    from codethinker.contra.normalize import NormalizeError, normalize_source
    from codethinker.contra.render import render_trace
    from codethinker.contra.tracer import trace
    from codethinker.sandbox import Sandbox, SandboxConfig

    source = _read(args.code, "code")
    try:
        normalize_source(source, args.entry)
    except NormalizeError as exc:
        raise UsageError(f"{args.code}: {exc}") from None
    with Sandbox(SandboxConfig(timeout_s=args.timeout, workers=1)) as sb:
        out = trace(source, args.input, args.entry, sandbox=sb)
    if out.flow is None:
        raise UsageError(f"cannot trace {args.entry}({args.input}): {out.reason}")
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


def _load_truth(path: str) -> Flow:
    """The truth JSON at ``path`` as a Flow; a ``UsageError`` naming the file and the field otherwise."""
    from codethinker.contra.tracer import TRUTH_VERSION, Flow

    text = _read(path, "truth")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"truth file {path}: not JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise UsageError(f"truth file {path}: must hold a JSON object, got {type(data).__name__}")
    version = data.get("version")
    if "version" not in data:
        raise UsageError(f"truth file {path}: field 'version' is missing (this codethinker reads {TRUTH_VERSION})")
    if type(version) is not int or version != TRUTH_VERSION:
        got = json.dumps(version)[:40]
        raise UsageError(f"truth file {path}: field 'version' must be {TRUTH_VERSION} (this codethinker's), got {got}")
    try:
        return Flow.from_json(text)
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"truth file {path}: {str(exc)[:300]}") from None


def cmd_score(args: argparse.Namespace) -> int:
    from codethinker.rewards.crm import crm_score

    rollout = _read(args.rollout, "rollout")
    flow = _load_truth(args.truth)
    try:
        scorer = _scorer(args)
    except ValueError as exc:  # the reward's own config check (the options are checked already)
        raise UsageError(str(exc)) from None
    out = dict(scorer(rollout, flow))
    if args.reward != "crm":  # RCS always measures the ConTra consistency of the rollout
        out["rcs"] = crm_score(rollout, flow)["rcs"]
    try:
        line = json.dumps(out, allow_nan=False)
    except ValueError as exc:
        raise UsageError(f"score is not finite: {exc}") from None
    print(line)
    return 0


def cmd_preflight(args: argparse.Namespace) -> int:
    from codethinker import preflight
    from codethinker.params import ParamsError

    try:
        if args.show_params:
            print(preflight.params_table(args.params, args.profile))
            return 0
        report = preflight.run_preflight(args.params, args.profile)
    except ParamsError as exc:
        raise UsageError(str(exc)) from None
    print(preflight.format_report(report, sys.stdout.encoding), flush=True)
    return 0 if report.ok else 1


def cmd_check_params(args: argparse.Namespace) -> int:
    import time

    from codethinker.config.check import check_params
    from codethinker.params import ParamsError

    start = time.perf_counter()
    try:
        checked = check_params(args.params, args.profile)
    except ParamsError as exc:
        raise UsageError(str(exc)) from None
    print(f"{args.params}: {len(checked)} sections valid ({time.perf_counter() - start:.2f} s)")
    return 0


def cmd_plots(args: argparse.Namespace) -> int:
    from codethinker.ops.plots import render_all

    if not (Path(args.root) / "dvc.yaml").is_file():
        raise UsageError(f"{args.root}: no dvc.yaml here (--root names the project folder)")
    done = render_all(args.root, args.out)
    for path in done["written"]:
        print(path)
    for name, files in done["skipped"].items():
        print(f"skipped {name}: missing {', '.join(files)}", file=sys.stderr)
    return 0


def cmd_repro(args: argparse.Namespace) -> int:
    from codethinker.logs import quiet_libraries

    quiet_libraries()  # before MLflow is imported: its INFO lines of creating the store stay out of the log
    from codethinker.ops.runs import repro

    return repro(args.dvc_args, exp=args.command == "exp")


def build_parser() -> argparse.ArgumentParser:
    from codethinker.params import PROFILES
    from codethinker.rewards.crm import MAX_ALPHA

    p = _Parser(prog="codethinker", description=__doc__.split("\n")[0])
    from codethinker import __version__

    p.add_argument("--version", action="version", version=f"codethinker {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    t = sub.add_parser("trace", help="print the ground-truth ConTra trace of f(input)")
    t.add_argument("--code", required=True, help="Python file that defines the function")
    t.add_argument("--input", required=True, help="argument text as inside f(...), e.g. '[1, 2], 3'")
    t.add_argument("--entry", default="f", help="name of the function under test (default: f)")
    t.add_argument("--json", action="store_true", help="print the flow as truth JSON instead")
    t.add_argument(
        "--timeout", type=_positive, default=2.0, help=f"seconds before the run is stopped, up to {MAX_TIMEOUT_S:g}"
    )
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
    s.add_argument(
        "--alpha",
        type=_float_in(0.0, MAX_ALPHA, "a finite number"),
        default=1.0,
        help=f"weight of R_proc, 0 to {MAX_ALPHA:g} (default 1)",
    )
    s.set_defaults(func=cmd_score)
    from codethinker.evaluation.commands import add_eval_arguments, add_report_arguments

    e = sub.add_parser("eval", help="evaluate a model on CRUXEval-O / REval-FO / LCB-O (pass@1, RCS, depth)")
    add_eval_arguments(e)
    e.set_defaults(func=_evaluation("run_eval"))
    r = sub.add_parser("report", help="the paper's tables (Markdown) from evaluation metrics or MLflow runs")
    add_report_arguments(r)
    r.set_defaults(func=_evaluation("run_report"))
    f = sub.add_parser(
        "preflight", help="check that what a profile needs is there (endpoints, models, GPUs, verl, Ray, data)"
    )
    f.add_argument(
        "--profile", choices=PROFILES, help="resolve params.yaml for this profile (default: its base.profile)"
    )
    f.add_argument("--params", default="params.yaml", help="the params file (default: params.yaml)")
    f.add_argument(
        "--show-params", action="store_true", help="print the params resolved for the profile instead, one per line"
    )
    f.set_defaults(func=cmd_preflight)
    c = sub.add_parser("check-params", help="check every section of params.yaml as its stage will (exit 2 on a slip)")
    c.add_argument("--params", default="params.yaml", help="the params file (default: params.yaml)")
    c.add_argument("--profile", choices=PROFILES, help="resolve for this profile (default: its base.profile)")
    c.set_defaults(func=cmd_check_params)
    g = sub.add_parser("plots", help="render dvc.yaml's plots as PNG images, offline (one per plot + plots.png)")
    g.add_argument("--out", default="docs/img", help="folder of the images (default: docs/img)")
    g.add_argument("--root", default=".", help="the project folder holding dvc.yaml (default: .)")
    g.set_defaults(func=cmd_plots)
    passthrough = "every argument after it goes to dvc"
    d = sub.add_parser(
        "repro",
        help="`dvc repro ARGS` under one MLflow parent run; exits with dvc's exit code",
        description=f"`dvc repro ARGS` under one MLflow parent run ({passthrough}; `dvc repro --help` lists them).",
    )
    d.set_defaults(func=cmd_repro, passthrough=True)
    x = sub.add_parser(
        "exp",
        help="`exp run ARGS`: `dvc exp run ARGS` under one MLflow parent run named after the experiment",
        description=f"`dvc exp run ARGS` under one MLflow parent run ({passthrough}; `dvc exp run --help`).",
    )
    x.add_argument("action", choices=["run"], help="the dvc exp command (only run)")
    x.set_defaults(func=cmd_repro, passthrough=True)
    _check_numeric_options(p)
    return p


def _evaluation(name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from codethinker.evaluation import commands

        return int(getattr(commands, name)(args))

    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, rest = parser.parse_known_args(argv)
        if rest and not getattr(args, "passthrough", False):
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        args.dvc_args = rest
        return int(args.func(args))
    except CodethinkerError as exc:
        print(error_line("codethinker", exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
