"""The stage runner: every ``stages/*.py`` runs the same way.

    @stage_main
    def main() -> None:
        cfg = load_config(DedupConfig)            # the typed params section (codethinker.config)
        with stage_run("dedup", cfg.as_dict()):
            run(cfg)               # writes the stage's outs and its metrics file

- :func:`stage_run` opens the stage's MLflow child run under the pipeline's parent run, logs the
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

import functools
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from codethinker.errors import CodethinkerError, error_line, one_line
from codethinker.ops.runs import stage_run

__all__ = ["stage_main", "stage_run"]

P = ParamSpec("P")
R = TypeVar("R")


def stage_main(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` (a stage's ``main``) with expected errors reported in one line and exited with their code."""
    prog = fn.__module__.rsplit(".", 1)[-1] if fn.__module__ != "__main__" else _main_name()

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
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
