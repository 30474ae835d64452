"""The zygote and sample processes of :mod:`codethinker.sandbox` (they run INSIDE the sandbox).

Not public API. The parent starts one *zygote* per worker slot, as ``python -B -S -c BOOT``
with its JSON configuration on stdin (inside bubblewrap unless isolation is "none"); BOOT calls
:func:`codethinker.sandbox.worker.main.main`. The zygote imports what samples and runners need
(the runners by their ``"module:attr"`` specs in the configuration,
:mod:`codethinker.sandbox.runners`) and then never runs user code. Every sample runs in a
process of its own, forked from the zygote:

* ``fork N L`` from the parent (a SOCK_SEQPACKET socket carrying the two pipe ends of the new
  process): the zygote makes sure the previous process of *lane* ``L`` is dead and reaped,
  empties and recreates the lane's private dir, forks, and hands the parent a pidfd of the new
  process. There are ``LANES`` (3) lanes per slot, each with its own unprivileged uid and
  private dir, so the sample that runs and the next processes (forked while it runs) never
  share a uid or a dir.
  The new process locks itself down (:mod:`codethinker.sandbox.lockdown`), sends a ready frame
  and waits for one job (:mod:`codethinker.sandbox.worker.sample`).
* It runs that one job, sends one result frame and exits; it never serves a second job. The
  parent SIGKILLs it through the pidfd as soon as the frame is in (or at the hard time limit,
  or when its result pipe closes), so a sample that sent a frame early and kept running stops
  there, and the next job goes to a ready process of another lane at once: one round trip per
  job.
* Nothing of a sample reaches the next one: the next process was forked from the zygote, which
  never ran user code (no memory, finalizers, registries or hooks of earlier samples), its dir
  is new, and the lane dirs sit in root-owned parents that only the lane's gid may traverse.

Pipes (:mod:`codethinker.sandbox.worker.pipes`): request (parent -> sample): 8-byte
little-endian length, then a pickle (the parent is trusted, so the ordinary unpickler is used);
result (sample -> parent): the same framing around the bounded wire format of
:mod:`codethinker.sandbox.protocol` (JSON with tags; no pickle), encoded by
:func:`~codethinker.sandbox.worker.pipes.send` (the ready frame) and by the sender that
:func:`~codethinker.sandbox.worker.pipes.make_sender` binds before the sample's code runs (the
result) only, and decoded by the parent's
:func:`codethinker.sandbox.protocol.decode` only. The pipes are not fds 0/1/2, so C-level writes
to stdout/stderr cannot corrupt them.

Only the standard library, the sandbox's own in-sandbox modules (this package,
:mod:`~codethinker.sandbox.protocol`, :mod:`~codethinker.sandbox.runners`,
:mod:`~codethinker.sandbox.fs`, :mod:`~codethinker.sandbox.lockdown`,
:mod:`~codethinker.sandbox.seccomp`) and the registered runners (tolerantly) are imported here:
the worker must stay lean, and must not import the parent's side (``codethinker.sandbox.pool``;
the package's ``__init__`` loads it only on first use).
"""
