"""Generation engines behind one contract (:mod:`codethinker.engines.base`), opened by one factory,
:func:`open_engine` (:mod:`codethinker.engines.factory`)."""

from codethinker.engines.factory import open_engine, resolve_backend

__all__ = ["open_engine", "resolve_backend"]
