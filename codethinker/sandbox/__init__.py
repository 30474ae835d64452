"""Run untrusted Python (a function source plus an input) in isolated worker processes.

Every job returns a typed :class:`SandboxResult` (``ok`` / ``timeout`` / ``error`` / ``memory`` /
``killed``) and the value as plain builtin data. Each worker slot is its own bubblewrap sandbox
(no network, read-only filesystem, private pid/ipc/uts namespaces, scrubbed environment) holding
a zygote process that never runs user code. Every sample runs in a fresh process forked from
that zygote, under an unprivileged uid and resource limits (address space, file size, no new
processes or threads), with an emptied private dir; nothing of one sample (memory, finalizers,
registries, files) can reach the next. The next process is forked while the current sample runs.

>>> from codethinker.sandbox import Job, Sandbox, SandboxConfig
>>> import codethinker.contra.values  # registers the "call" runner
>>> with Sandbox(SandboxConfig(timeout_s=2.0)) as sb:  # doctest: +SKIP
...     sb.run(Job("def f(x):\\n    return x * 2", args=(21,))).value
...     [r.status for r in sb.map([Job("def f():\\n    while True: pass"), Job("def g(): pass")])]
...     for res in sb.imap(Job(f"def f():\\n    return {i}") for i in range(3)):  # as they come, in order
...         print(res.value)
42
['timeout', 'error']
0
1
2

Limits (see docs/sandbox.md for the threat model and what is NOT protected against):

* wall-clock timeout per sample (``timeout_s``; a timer in the sample's process, then SIGKILL
  at ``timeout_s + grace_s``), address space ``memory_mb`` beyond the process's baseline,
  ``output_limit`` bytes of stdout/stderr kept per stream, RLIMIT_NPROC=1 under an
  unprivileged uid (no fork, no threads), RLIMIT_FSIZE, RLIMIT_NOFILE, no core dumps, a seccomp
  filter when :mod:`codethinker.sandbox.seccomp` is present and the kernel supports it;
* with ``isolation="none"`` (no bubblewrap) network and filesystem are NOT isolated: only the
  uid drop (when running as root), rlimits, scrubbed environment and private temp dir remain;
* use one :class:`Sandbox` from one thread at a time (calls are serialized by a lock; an unfinished
  ``imap`` holds it until it is exhausted or closed);
* str hashes are seeded with ``PYTHONHASHSEED=0``, so set order is the same in every run.

Runners: a job names its runner (``Job.runner``, default ``"call"``); the module that defines a
runner registers it with :func:`register_runner` (:mod:`codethinker.sandbox.runners`), so import
that module before the sandbox starts: ``codethinker.contra.values`` registers ``"call"`` (the
canonical literal of ``fn(*args, **kwargs)``), ``codethinker.contra.tracer`` ``"trace"``. An
unregistered name gives the job an ``UnknownRunner`` error result.

The package (worker slots, isolation, the wire format, the in-sandbox worker) imports nothing
from the rest of codethinker. Its public names are loaded on first use: the in-sandbox worker
(:mod:`codethinker.sandbox.worker`) imports modules of this package, and must not load the
parent's pool with them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from codethinker.sandbox.runners import RUNNERS, register_runner

if TYPE_CHECKING:
    from codethinker.sandbox.bwrap import PROJECT_ROOT, bwrap_available
    from codethinker.sandbox.config import SandboxConfig
    from codethinker.sandbox.jobs import STATUSES, Job, SandboxResult, Status
    from codethinker.sandbox.pool import Sandbox

__all__ = [
    "PROJECT_ROOT",
    "RUNNERS",
    "STATUSES",
    "Job",
    "Sandbox",
    "SandboxConfig",
    "SandboxResult",
    "Status",
    "bwrap_available",
    "register_runner",
]

_LAZY = {
    "PROJECT_ROOT": "bwrap",
    "bwrap_available": "bwrap",
    "SandboxConfig": "config",
    "Job": "jobs",
    "SandboxResult": "jobs",
    "STATUSES": "jobs",
    "Status": "jobs",
    "Sandbox": "pool",
}


def __getattr__(name: str) -> Any:
    """The public names above, imported from their module on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
