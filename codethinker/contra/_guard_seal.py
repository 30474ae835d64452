"""The seal of an armed trace process (part of :mod:`codethinker.contra._guard`; runs INSIDE the
sandbox child): what a profile function cannot refuse, because C code can call it without an event.

:func:`make_seal` is called once by ``_guard.install`` before the sample's code runs; it returns
``apply()`` (run when the process is armed), ``on_gc()`` (the hook's answer to the gc callback) and
``sealed()`` (the reason the seal is broken, or None; checked at ``begin``, before each snapshot and
at ``end``). Applying the seal

* replaces each function of :data:`~codethinker.contra._guard_rules.SEALED` in its module dict by a
  stub, ``functools.partial(sys.audit, EVENT_REFUSED, "module.name")``: the guard's hook refuses and
  records the call. The stub holds nothing but ``sys.audit``, so no original is left in reach (the
  worker bound what it needs before the sample's code ran);
* removes ``gc.garbage`` from the gc module (its ``__getattr__`` refuses the name);
* appends a gc callback, ``functools.partial(sys.audit, EVENT_GC)``: at the start of every collection
  the hook resets gc debug flags (so ``DEBUG_SAVEALL`` never keeps a collected frame) and empties the
  collector's real garbage list, recording either.
"""

from __future__ import annotations

import functools
import itertools
import operator
import sys
from collections.abc import Callable
from typing import Any

from codethinker.contra._guard_rules import SEALED

__all__ = ["EVENT_GC", "EVENT_REFUSED", "make_seal"]

EVENT_REFUSED = "codethinker.tracer.guard.refused"
EVENT_GC = "codethinker.tracer.guard.gc"


def make_seal(
    st: dict[str, Any], get_debug: Callable[[], int], set_debug: Callable[[int], None], garbage: list, callbacks: list
) -> tuple[Callable[[], None], Callable[[], None], Callable[[], str | None]]:
    """``(apply, on_gc, sealed)`` over the genuine gc functions and lists given (module docstring)."""
    audit, partial, modules = sys.audit, functools.partial, sys.modules
    entries: list[tuple[dict, str, Any]] = []
    for module_name, name in SEALED:
        module = modules.get(module_name)
        if module is not None and name in vars(module):
            entries.append((vars(module), name, partial(audit, EVENT_REFUSED, f"{module_name}.{name}")))
    gc_dict = vars(modules["gc"])
    gc_getattr = partial(audit, EVENT_REFUSED, "gc.garbage (or another missing attribute of gc)")
    callback = partial(audit, EVENT_GC)
    is_, any_, map_, repeat = operator.is_, any, map, itertools.repeat

    def record(why: str) -> None:
        if st["gate"]:
            if st["tripped"] is None:
                st["tripped"] = why
        elif st["sticky"] is None:
            st["sticky"] = why

    def apply() -> None:
        for d, name, stub in entries:
            d[name] = stub
        gc_dict.pop("garbage", None)
        gc_dict["__getattr__"] = gc_getattr
        callbacks.append(callback)
        st["sealed"] = True

    def on_gc() -> None:
        if get_debug():
            record("gc debug flags were set")
            set_debug(0)
        if garbage:
            record("the collector kept objects in gc.garbage")
            del garbage[:]

    def sealed() -> str | None:
        if not st.get("sealed"):
            return "the process was not sealed before the sample's code ran"
        if get_debug():
            return "gc debug flags were set"
        if garbage:
            return "the collector kept objects in gc.garbage"
        if not any_(map_(is_, callbacks, repeat(callback))):
            return "the guard's gc callback was removed"
        if "garbage" in gc_dict or gc_dict.get("__getattr__") is not gc_getattr:
            return "gc.garbage was put back"
        for d, name, stub in entries:
            if d.get(name) is not stub:
                return f"a sealed function was put back ({name})"
        return None

    return apply, on_gc, sealed
