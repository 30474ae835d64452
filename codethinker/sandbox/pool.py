"""The pool of a :class:`Sandbox`: its public API (``run``, ``map``, ``imap``, ``close``), the choice of
isolation, starting worker slots, and the event loop that sends jobs and waits for results
(the messages themselves are handled by :class:`~codethinker.sandbox.dispatch.Dispatcher`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import pickle
import queue
import secrets
import selectors
import sys
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sized
from typing import Any

from codethinker.sandbox import bwrap as bw
from codethinker.sandbox.bwrap import bwrap_available
from codethinker.sandbox.config import (
    FSIZE_BYTES,
    MAX_SOURCE_CHARS,
    NOFILE,
    NPROC,
    START_TIMEOUT_S,
    UID_RANGE,
    SandboxConfig,
)
from codethinker.sandbox.dispatch import Dispatcher
from codethinker.sandbox.jobs import Job, SandboxResult
from codethinker.sandbox.runners import RUNNERS
from codethinker.sandbox.slot import Helper, Slot, cleanup, spawn_zygote
from codethinker.sandbox.worker.main import LANES
from codethinker.sandbox.worker.pipes import HEADER

__all__ = ["Sandbox"]

log = logging.getLogger("codethinker.sandbox")

MAX_AHEAD = 256  # finished results an imap keeps while an earlier job still runs; then it sends no new job


class Sandbox(Dispatcher):
    """A pool of sandboxed workers; a context manager. Workers start lazily on first use."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        super().__init__(config or SandboxConfig())
        self.n_workers = min(self.config.workers or os.cpu_count() or 1, UID_RANGE // LANES)
        self.isolation = self._resolve_isolation()
        self.grace_s = self.config.grace_s if self.config.grace_s is not None else 1.0 + self.config.timeout_s / 2
        self._root = os.geteuid() == 0
        base = self.config.uid_base
        if base is None:
            base = 10_000_000 + (os.getpid() % 100_000) * UID_RANGE
        self._uid_base = base
        self._plan = bw.mask_plan(bw.interpreter_paths(), self.config.hide) if self.isolation == "bwrap" else []
        self._workdirs = bw.private_dirs(self._plan, LANES)
        system = bw.system_args(bw.interpreter_paths()) if self.config.host == "system" else None
        self._bwrap = bw.bwrap_args(self._plan, system) if self.isolation == "bwrap" else []
        self._runners: dict[str, str] | None = None  # the registry when the first slot starts
        self._lock = threading.Lock()
        self._free = list(range(UID_RANGE // LANES))
        self._closed = False
        self._owner: int | None = None  # the thread serving a map (its imap holds the lock)
        self._streams: weakref.WeakSet = weakref.WeakSet()  # imap iterators not yet collected
        self._wake_r = self._wake_w = -1
        self._finalizer = weakref.finalize(self, cleanup, self._slots, self._helper_ref)

    # ---------------------------------------------------------------- public
    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def run(self, job: Job) -> SandboxResult:
        """Run one job (see :meth:`map`)."""
        return self.map([job])[0]

    def map(
        self, jobs: Iterable[Job], *, progress: bool | str = False, total: int | None = None
    ) -> list[SandboxResult]:
        """Run ``jobs`` in parallel over the workers; results in the order of ``jobs`` (the list of
        :meth:`imap`). ``progress``: show a tqdm bar on stderr (a string is its description); ``total``: the
        bar's count when ``jobs`` has no length (a generator), so it shows an ETA."""
        return list(self.imap(jobs, progress=progress, total=total))

    def imap(
        self, jobs: Iterable[Job], *, progress: bool | str = False, total: int | None = None
    ) -> Iterator[SandboxResult]:
        """Run ``jobs`` in parallel over the workers and yield their results in the order of ``jobs``,
        each as soon as it and the ones before it are done.

        ``jobs`` is read only as workers become free (it may be a generator), and a result is kept
        only until it is yielded (at most :data:`MAX_AHEAD` finished results wait for a slower one
        before them), so memory does not grow with the number of jobs. The sandbox serves one map at a
        time: until the iterator is exhausted or closed (``close()`` of the iterator or of the
        sandbox, or dropping it), another ``map``/``imap``/``run`` from the same thread raises
        ``RuntimeError``; from another thread it waits. Jobs still running when the iterator is
        closed are ended.
        """
        stream = self._stream(jobs, progress, total)
        self._streams.add(stream)
        return stream

    def _stream(self, jobs: Iterable[Job], progress: bool | str, total: int | None) -> Iterator[SandboxResult]:
        total = len(jobs) if isinstance(jobs, Sized) else total
        it = iter(jobs)
        first = next(it, None)
        if first is None:
            return
        if not self._lock.acquire(blocking=False):
            if self._owner == threading.get_ident():
                raise RuntimeError("this Sandbox is still serving an unfinished imap() in this thread")
            self._lock.acquire()
        self._owner = threading.get_ident()
        bar = None
        try:
            if self._closed:
                raise RuntimeError("Sandbox is closed")
            if progress:
                from tqdm.auto import tqdm

                bar = tqdm(
                    total=total,
                    desc=progress if isinstance(progress, str) else "sandbox",
                    file=sys.stderr,
                    unit="job",
                    dynamic_ncols=True,
                )
            yield from self._loop(itertools.chain([first], it), bar)
        finally:
            self._abandon_busy()  # after an exception, Ctrl-C or an early close: no stale job may reach the next map
            self._done = None
            if bar is not None:
                bar.close()
            self._owner = None
            self._lock.release()

    def close(self) -> None:
        """Stop all workers (idempotent); an unfinished :meth:`imap` of this thread is closed first."""
        if self._closed:
            return
        if self._owner == threading.get_ident():
            for stream in list(self._streams):
                stream.close()  # the one waiting at a yield ends its jobs and releases the lock
        with self._lock:
            if self._closed:  # closed by another thread meanwhile
                return
            self._closed = True
            cleanup(self._slots, self._helper_ref)
            if self._sel is not None:
                self._sel.close()
            for fd in (self._wake_r, self._wake_w):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._finalizer.detach()

    # ---------------------------------------------------------------- isolation and spawning
    def _resolve_isolation(self) -> str:
        iso = self.config.isolation
        if iso == "bwrap":
            if not bwrap_available():
                raise RuntimeError("isolation='bwrap' but bubblewrap (bwrap) is missing or does not work here")
            return "bwrap"
        if iso == "auto" and bwrap_available():
            return "bwrap"
        log.warning(
            "sandbox isolation 'none': bubblewrap is %s; network and filesystem are NOT isolated "
            "(uid drop when root, rlimits, scrubbed environment and a private temp dir remain)",
            "not requested" if iso == "none" else "not available",
        )
        return "none"

    def _spawn(self, slot: Slot) -> Slot:  # runs on the helper thread
        limits = {"memory_mb": self.config.memory_mb, "fsize": FSIZE_BYTES, "nofile": NOFILE, "nproc": NPROC}
        assert self._runners is not None
        return spawn_zygote(slot, self.isolation, self._bwrap, self._workdirs, limits, self._runners)

    def _ensure_started(self) -> None:
        if self._runners is None:  # every slot of this sandbox, restarted ones too, gets the same runners
            self._runners = dict(RUNNERS)
        if not self._helper_ref:
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_r, False)
            os.set_blocking(self._wake_w, False)
            self._sel = selectors.DefaultSelector()
            self._sel.register(self._wake_r, selectors.EVENT_READ, None)
            helper = Helper(self._wake_w)
            self._helper_ref.append(helper)
            helper.start()
        while len(self._slots) < self.n_workers and self._free:
            index = self._free.pop(0)
            uids = [self._uid_base + LANES * index + lane for lane in range(LANES)] if self._root else None
            slot = Slot(index, uids)
            self._slots.append(slot)
            self._helper_ref[0].requests.put(("spawn", self._spawn, slot))

    def _on_helper(self) -> None:
        assert self._sel is not None
        with contextlib.suppress(BlockingIOError):
            os.read(self._wake_r, 4096)
        helper = self._helper_ref[0]
        while True:
            try:
                tag, slot, res = helper.done.get_nowait()
            except queue.Empty:
                return
            if tag == "reap":
                self._free.append(slot.index)
            elif isinstance(res, Slot):
                if slot in self._slots:
                    assert slot.ctl is not None
                    self._sel.register(slot.ctl, selectors.EVENT_READ, ("ctl", slot, None))
            else:
                if slot in self._slots:
                    self._slots.remove(slot)
                self._free.append(slot.index)
                self._start_failed(f"could not start a worker: {type(res).__name__}: {res}")

    # ---------------------------------------------------------------- the event loop
    def _send_job(self, slot: Slot, index: int, job: Job) -> SandboxResult | None:
        """Send ``job`` to the slot's ready process; a result when the job is refused."""
        if self._runners is None or job.runner not in self._runners:
            return SandboxResult("error", error_type="UnknownRunner", error_message=f"no runner {job.runner!r}")
        if type(job.source) is not str or len(job.source) > MAX_SOURCE_CHARS:
            return SandboxResult("error", error_type="BadJob", error_message="source must be a str of <= 1e6 chars")
        req = {
            "source": job.source,
            "args": tuple(job.args),
            "kwargs": dict(job.kwargs),
            "entry": job.entry,
            "runner": job.runner,
            "entry_def": bool(job.entry_def),
            "options": dict(job.options),
            "timeout": float(self.config.timeout_s),
            "output_limit": int(self.config.output_limit),
            "key": secrets.token_hex(16),  # the result frame must carry it (see _on_frame)
        }
        try:
            data = pickle.dumps(req, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            return SandboxResult("error", error_type="BadJob", error_message=f"job not picklable: {exc}"[:500])
        child = slot.spare()
        assert child is not None
        child.job = index
        child.key = req["key"]
        child.t_sent = time.monotonic()
        child.deadline = child.t_sent + self.config.timeout_s + self.grace_s
        slot.n_tasks += 1
        cap = self.config.max_tasks_per_worker
        slot.retiring = cap is not None and slot.n_tasks >= cap
        try:
            view = memoryview(HEADER.pack(len(data)) + data)
            while view:
                view = view[os.write(child.req_w, view) :]
        except OSError:
            pass  # the process died: its result pipe reports EOF and the job ends as killed
        os.close(child.req_w)
        child.req_w = -1
        self._maybe_fork(slot)  # the next process starts while this sample runs
        return None

    def _loop(self, jobs: Iterator[Job], bar: Any) -> Iterator[SandboxResult]:
        """The event loop of one map: send jobs to ready processes as they free up, read results,
        enforce deadlines; yield results in job order."""
        finished: dict[int, SandboxResult] = {}  # results waiting for an earlier one
        pulled = yielded = 0
        exhausted = False

        def done(i: int, res: SandboxResult) -> None:
            finished[i] = res
            self.stats[res.status] += 1
            if bar is not None:
                bar.update(1)

        self._done = done
        for slot in list(self._slots):  # lanes an abandoned map left empty
            self._maybe_fork(slot)
        while True:
            while yielded in finished:
                res = finished.pop(yielded)
                yielded += 1
                yield res
            if exhausted and yielded == pulled:
                return
            self._ensure_started()
            for slot in list(self._slots):
                while not exhausted and len(finished) < MAX_AHEAD and slot.can_take():
                    job = next(jobs, None)
                    if job is None:
                        exhausted = True
                        break
                    pulled += 1
                    refused = self._send_job(slot, pulled - 1, job)
                    if refused is not None:
                        done(pulled - 1, refused)
            if yielded in finished or (exhausted and yielded == pulled):
                continue
            assert self._sel is not None
            for key, _ in self._sel.select(timeout=self._select_timeout()):
                if key.data is None:
                    self._on_helper()
                    continue
                kind, slot, child = key.data
                if slot not in self._slots:
                    continue
                if kind == "ctl":
                    self._on_ctl(slot)
                elif slot.children.get(child.n) is child and child.res_r == key.fd:
                    self._on_result_pipe(slot, child)
            self._check_deadlines()

    def _select_timeout(self) -> float:
        now = time.monotonic()
        deadlines = [s.started + START_TIMEOUT_S for s in self._slots if not s.zygote_ready]
        for s in self._slots:
            for c in s.children.values():
                deadlines.append(c.deadline if c.job is not None else c.born + START_TIMEOUT_S)
        return min(1.0, max(0.0, min(deadlines) - now)) if deadlines else 1.0

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for slot in list(self._slots):
            if not slot.zygote_ready:
                if now > slot.started + START_TIMEOUT_S and slot.ctl is not None:
                    self._zygote_lost(slot, f"worker not ready after {START_TIMEOUT_S} s")
                continue
            for child in list(slot.children.values()):
                if slot not in self._slots or slot.children.get(child.n) is not child:
                    continue
                if child.job is not None and now > child.deadline:
                    self.stats["hard_kills"] += 1
                    limit = self.config.timeout_s + self.grace_s
                    res = SandboxResult(
                        "timeout",
                        error_type="Timeout",
                        error_message=f"killed after {limit:.2f} s",
                        duration_s=now - child.t_sent,
                    )
                    self._end(slot, child, res)
                elif (
                    child.job is None and not (child.ready and child.pidfd >= 0) and now > child.born + START_TIMEOUT_S
                ):
                    self._end(slot, child, None)
