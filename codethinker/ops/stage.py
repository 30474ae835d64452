"""The stage runner: every ``stages/*.py`` runs the same way.

    ARGS = stage_args(
        "dedup", __doc__,
        samples=path("exec_filter's samples (JSONL)"), ..., metrics=path("the stage's metrics (JSON)"),
    )

    @stage_main
    def main(argv: list[str] | None = None) -> None:
        paths = ARGS.parse(argv)                  # the files it reads and writes: dvc.yaml's cmd
        cfg = load_config(DedupConfig)            # the typed params section (codethinker.config)
        with stage_run("dedup", cfg.as_dict()):
            run(cfg, paths)        # writes the stage's outs and its metrics file

- :func:`stage_args` declares a stage's command line: every file or folder it reads or writes is a
  required ``--<name> PATH`` argument (:func:`path`; ``many``: one or more), parsed to
  :class:`~pathlib.Path`. The paths are written once, as the arguments of the stage's ``cmd`` in
  ``dvc.yaml``, beside the same strings in its ``deps``/``outs``/``metrics``/``plots``
  (``tests/ops/test_stage_deps.py`` checks both directions); ``params.yaml`` holds parameters only.
  ``python -m stages.<name> --help`` lists them. An input whose rows the stage turns into its outputs
  is declared ``rows=True``: :meth:`StageArgs.parse` stops the stage when it is missing or empty
  (:func:`codethinker.data.io.require_rows`: one line naming the file, exit 2), before anything is
  written, so an empty upstream file never replaces the outputs with 0 rows.

- :func:`stage_run` opens the stage's MLflow child run under the parent run whose id its launcher
  passed (``$CODETHINKER_PARENT_RUN_ID``; without one, a top-level run of its own), logs the
  params, and on a normal exit logs what the stage declares in ``dvc.yaml`` exactly once: the
  numbers of its metrics files, its plots, an out manifest, small outs, a PEFT adapter out
  (:mod:`codethinker.ops.autolog`). A stage logs only what ``dvc.yaml`` cannot say (per-step
  curves, tags); the metrics file it writes inside the run is what MLflow gets.
- :func:`stage_main` wraps the stage's entry point: a
  :class:`~codethinker.errors.CodethinkerError` anywhere in it (params, data, the run) becomes one
  line ``<stage>: error: <message>`` on stderr and the error's exit code (the child run, if open,
  ends ``FAILED``), as in the ``codethinker`` command line. Other exceptions keep their traceback.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ParamSpec, TypeVar

from codethinker.errors import CodethinkerError, error_line, one_line
from codethinker.logs import quiet_libraries
from codethinker.ops.runs import stage_run

__all__ = ["PathArg", "StageArgs", "path", "stage_args", "stage_main", "stage_run"]

P = ParamSpec("P")
R = TypeVar("R")


def stage_main(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` (a stage's ``main``) with expected errors reported in one line and exited with their code."""
    prog = fn.__module__.rsplit(".", 1)[-1] if fn.__module__ != "__main__" else _main_name()

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        quiet_libraries()  # before the stage imports vLLM, transformers or TRL
        try:
            return fn(*args, **kwargs)
        except CodethinkerError as exc:
            print(error_line(prog, one_line(exc)), file=sys.stderr)
            raise SystemExit(exc.exit_code) from None

    return wrapper


def _main_name() -> str:
    """``dedup`` for ``python -m stages.dedup`` (``__main__``'s spec names the module)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec.name.rsplit(".", 1)[-1] if spec is not None else "stage"


@dataclass(frozen=True)
class PathArg:
    """A file or folder a stage reads or writes: ``--<name> PATH`` (``many``: ``PATH [PATH ...]``)."""

    help: str
    many: bool = False
    made_by: str | None = None  # the stage that writes it: parse() stops when it is missing
    rows: bool = False  # an input of rows: parse() stops when it is missing or empty


def path(help: str, *, many: bool = False, made_by: str | None = None, rows: bool = False) -> PathArg:
    """One path argument of a stage (required; a :class:`~pathlib.Path`, or a list of them if ``many``);
    ``made_by``: the stage that writes it, named in the error when it is missing; ``rows``: an input whose
    rows become the stage's outputs, refused when missing or empty."""
    return PathArg(help, many, made_by, rows)


@dataclass(frozen=True)
class StageArgs:
    """A stage's command line: ``python -m stages.<name>``, its ``options`` (required strings, such as
    evaluate's ``--model``) and its ``paths`` (required, :class:`~pathlib.Path`)."""

    name: str
    description: str
    paths: Mapping[str, PathArg]
    options: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def flag(name: str) -> str:
        """``--truth-metrics`` for the argument ``truth_metrics``."""
        return "--" + name.replace("_", "-")

    def parser(self) -> argparse.ArgumentParser:
        ap = argparse.ArgumentParser(prog=f"python -m stages.{self.name}", description=self.description)
        for name, help in self.options.items():
            ap.add_argument(self.flag(name), dest=name, required=True, help=help)
        files = ap.add_argument_group("paths", "what the stage reads and writes (its cmd in dvc.yaml)")
        for name, arg in self.paths.items():
            nargs = "+" if arg.many else None
            files.add_argument(
                self.flag(name), dest=name, type=Path, nargs=nargs, required=True, metavar="PATH", help=arg.help
            )
        return ap

    def parse(self, argv: Sequence[str] | None = None) -> argparse.Namespace:
        """The arguments (``sys.argv[1:]`` when ``argv`` is None); a missing or unknown one exits 2 with usage,
        a path another stage makes (``made_by``) that does not exist exits with the stage to run first, an
        input of rows (``rows``) that is missing or empty is a :class:`~codethinker.data.io.RecordError`."""
        from codethinker.data.io import require_rows

        args = self.parser().parse_args(argv)
        for name, arg in self.paths.items():
            value = getattr(args, name)
            for p in value if arg.many else [value]:
                if arg.made_by and not p.exists():
                    raise SystemExit(f"{self.name}: {p} is missing; run `dvc repro {arg.made_by}` first")
                if arg.rows:
                    require_rows(p)
        return args


def stage_args(
    name: str, doc: str | None, /, *, options: Mapping[str, str] | None = None, **paths: PathArg
) -> StageArgs:
    """Stage ``name``'s command line; ``doc`` (the module docstring) gives ``--help`` its first line."""
    description = (doc or "").strip().split("\n", 1)[0]
    return StageArgs(name, description, dict(paths), dict(options or {}))
