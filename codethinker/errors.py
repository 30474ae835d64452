"""The project's one base of expected errors: what a user can fix, reported in one line.

A :class:`CodethinkerError` names the file, row, field or option at fault; the ``codethinker``
command line (:func:`codethinker.cli.main`) and every stage (:func:`codethinker.ops.stage.stage_main`)
print it as one line on stderr and exit with its :attr:`~CodethinkerError.exit_code` instead of a
traceback. Each project exception that is an expected error derives from it *and* keeps its
builtin base (``class ParamsError(CodethinkerError, ValueError)``), so ``except ValueError``
still catches it. Anything else (a bug) still ends in a traceback.
"""

from __future__ import annotations

__all__ = ["CodethinkerError", "UsageError", "error_line", "one_line"]


class CodethinkerError(Exception):
    """An expected error: reported in one line, exit code :attr:`exit_code` (2 unless a subclass says)."""

    exit_code: int = 2


class UsageError(CodethinkerError):
    """A command-line problem (bad option, missing file, unknown benchmark): one line, exit code 2."""


def error_line(prog: str, exc: BaseException | str) -> str:
    """``<prog>: error: <message>``, what a caller prints for an expected error."""
    return f"{prog}: error: {exc}"


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (a multi-line message's lines joined by `` | ``)."""
    return " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())
