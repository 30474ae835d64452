"""The runners a :class:`~codethinker.sandbox.Job` may name: ``name -> "module:attr"`` specs.

A runner is called in the sample's process as ``runner(fn, args, kwargs, options)`` on the
job's entry function and returns the job's value (plain data). The sandbox knows no runner of
its own: the module that defines one registers it by name, at import,

>>> register_runner("trace", "codethinker.contra.tracer:trace_runner")  # doctest: +SKIP

so a caller that builds a ``Job(runner=...)`` has imported it. A :class:`Sandbox` copies the
registry when it starts its first worker and hands the specs to its zygotes, which import
every runner before the privilege drop (:func:`load_runners`); a name missing from that copy
gives the job an ``UnknownRunner`` error result.

Standard library only: the worker imports this module inside the sandbox.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["RUNNERS", "load_runners", "register_runner"]

RUNNERS: dict[str, str] = {}


def register_runner(name: str, spec: str) -> None:
    """Make ``name`` a runner: ``spec`` is ``"module:attr"``, importable inside the sandbox.

    Registering a name again with the same spec does nothing; with another spec it is a
    ``ValueError`` (two modules would claim one name)."""
    module, sep, attr = spec.partition(":")
    if not (name and sep and module and attr):
        raise ValueError(f"runner {name!r}: the spec must be 'module:attr', not {spec!r}")
    old = RUNNERS.setdefault(name, spec)
    if old != spec:
        raise ValueError(f"runner {name!r} is registered as {old!r}; cannot register {spec!r}")


def load_runners(specs: Mapping[str, str]) -> dict[str, Callable[..., Any] | str]:
    """Import the runners named by ``specs`` (in the zygote); a runner whose module or attribute
    is missing maps to the error text its jobs report."""
    out: dict[str, Callable[..., Any] | str] = {}
    for name, spec in specs.items():
        mod_name, _, attr = spec.partition(":")
        try:
            out[name] = getattr(importlib.import_module(mod_name), attr)
        except BaseException as exc:
            out[name] = f"runner {name!r} ({spec}) is unavailable: {type(exc).__name__}: {exc}"[:500]
    return out
