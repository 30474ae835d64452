"""Run untrusted Python (a function source plus an input) in isolated worker processes.

Every job returns a typed :class:`SandboxResult` (``ok`` / ``timeout`` / ``error`` / ``memory`` /
``killed``) and the value as plain builtin data. Each worker slot is its own bubblewrap sandbox
(no network, read-only filesystem, private pid/ipc/uts namespaces, scrubbed environment) holding
a zygote process that never runs user code. Every sample runs in a fresh process forked from
that zygote, under an unprivileged uid and resource limits (address space, file size, no new
processes or threads), with an emptied private dir; nothing of one sample (memory, finalizers,
registries, files) can reach the next. The next process is forked while the current sample runs.

>>> from codethinker.sandbox import Job, Sandbox, SandboxConfig
>>> with Sandbox(SandboxConfig(timeout_s=2.0)) as sb:  # doctest: +SKIP
...     sb.run(Job("def f(x):\\n    return x * 2", args=(21,))).value
...     [r.status for r in sb.map([Job("def f():\\n    while True: pass"), Job("def g(): pass")])]
42
['timeout', 'error']

Limits (see docs/sandbox.md for the threat model and what is NOT protected against):

* wall-clock timeout per sample (``timeout_s``; a timer in the sample's process, then SIGKILL
  at ``timeout_s + grace_s``), address space ``memory_mb`` beyond the process's baseline,
  ``output_limit`` bytes of stdout/stderr kept per stream, RLIMIT_NPROC=1 under an
  unprivileged uid (no fork, no threads), RLIMIT_FSIZE, RLIMIT_NOFILE, no core dumps, a seccomp
  filter when :mod:`codethinker._seccomp` is present and the kernel supports it;
* with ``isolation="none"`` (no bubblewrap) network and filesystem are NOT isolated: only the
  uid drop (when running as root), rlimits, scrubbed environment and private temp dir remain;
* use one :class:`Sandbox` from one thread at a time (calls are serialized by a lock);
* str hashes are seeded with ``PYTHONHASHSEED=0``, so set order is the same in every run.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import pickle
import queue
import secrets
import selectors
import socket
import sys
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from codethinker import _sandbox_bwrap as bw
from codethinker import _wire
from codethinker._sandbox_bwrap import bwrap_available
from codethinker._sandbox_slot import (
    Child,
    Helper,
    Slot,
    cleanup,
    kill_zygote,
    reap_zygote,
    spawn_zygote,
    split_frames,
    stop_and_reap,
)
from codethinker._sandbox_worker import HEADER, LANES, RUNNERS

__all__ = ["RUNNERS", "Job", "Sandbox", "SandboxConfig", "SandboxResult", "bwrap_available"]

log = logging.getLogger(__name__)

PROJECT_ROOT = bw.PROJECT_ROOT
Status = Literal["ok", "timeout", "error", "memory", "killed"]
STATUSES = frozenset({"ok", "timeout", "error", "memory", "killed"})

MAX_RESULT_BYTES = _wire.MAX_FRAME_BYTES  # 8 MiB: a larger frame kills the sample's process
MAX_SOURCE_CHARS = 1_000_000
FSIZE_BYTES = 32 * 1024 * 1024  # RLIMIT_FSIZE
NOFILE = 64  # RLIMIT_NOFILE
NPROC = 1  # RLIMIT_NPROC under the unprivileged uid: the process itself, no fork, no threads
START_TIMEOUT_S = 60.0  # a zygote or sample process not ready by then is killed
MAX_START_FAILURES = 3  # consecutive start failures before the sandbox gives up
UID_RANGE = 1000  # uids per Sandbox: base + LANES * slot + lane
HASH_SEED = bw.HASH_SEED


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and pool settings of a :class:`Sandbox`."""

    timeout_s: float = field(default=2.0, metadata={"help": "wall-clock limit per sample, seconds"})
    memory_mb: int = field(default=1024, metadata={"help": "address-space cap per sample beyond its baseline, MiB"})
    workers: int | None = field(default=None, metadata={"help": "samples run in parallel (default: os.cpu_count())"})
    output_limit: int = field(default=65536, metadata={"help": "bytes of stdout and of stderr kept per sample"})
    isolation: str = field(
        default="auto",
        metadata={"help": "'bwrap' | 'none' | 'auto' (bwrap when it works here, else none with a warning)"},
    )
    max_tasks_per_worker: int | None = field(
        default=None,
        metadata={
            "help": "start a fresh sandbox (bwrap + zygote) for a slot after this many samples (None: never); "
            "every sample runs in a fresh process in any case"
        },
    )
    grace_s: float | None = field(
        default=None,
        metadata={"help": "parent-side SIGKILL after timeout_s + grace_s (default 1 + timeout_s / 2)"},
    )
    uid_base: int | None = field(
        default=None,
        metadata={"help": "first unprivileged uid for samples when root (default derived from the pid)"},
    )

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError("timeout_s must be > 0")
        if self.memory_mb is not None and self.memory_mb < 0:
            raise ValueError("memory_mb must be >= 0 (0: no cap)")
        if self.workers is not None and self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.output_limit < 0:
            raise ValueError("output_limit must be >= 0")
        if self.isolation not in ("bwrap", "none", "auto"):
            raise ValueError("isolation must be 'bwrap', 'none' or 'auto'")
        if self.max_tasks_per_worker is not None and self.max_tasks_per_worker < 1:
            raise ValueError("max_tasks_per_worker must be >= 1")


@dataclass(frozen=True)
class Job:
    """One sample: define ``entry`` by running ``source``, then run ``runner`` on it."""

    source: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    entry: str = "f"
    runner: str = "call"
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SandboxResult:
    """The outcome of one :class:`Job`; ``value`` is plain builtin data (``status == "ok"``)."""

    status: Status
    value: Any = None
    error_type: str | None = None
    error_message: str | None = None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# --------------------------------------------------------------------------- restricted unpickling
def _loads_plain(data: bytes) -> Any:
    """Decode a (possibly hostile) result frame: linear in its size, plain data only, bounded in
    depth, item count and hash collisions (:mod:`codethinker._wire`); raises WireError."""
    return _wire.decode(data, max_bytes=MAX_RESULT_BYTES)


def _opt_str(x: Any, limit: int = 10_000) -> str | None:
    return x[:limit] if type(x) is str else None


def _result_from_frame(msg: Any, output_limit: int) -> SandboxResult:
    """Validate a worker's result frame (the worker may be compromised)."""
    if type(msg) is not dict or msg.get("status") not in STATUSES:
        return SandboxResult("killed", error_type="ProtocolError", error_message="malformed result frame")
    duration = msg.get("duration_s")
    cap = output_limit + 100
    return SandboxResult(
        status=msg["status"],
        value=msg.get("value") if msg["status"] == "ok" else None,
        error_type=_opt_str(msg.get("error_type"), 200),
        error_message=_opt_str(msg.get("error_message")),
        stdout=_opt_str(msg.get("stdout"), cap) or "",
        stderr=_opt_str(msg.get("stderr"), cap) or "",
        duration_s=float(duration) if type(duration) is float else 0.0,
    )


# --------------------------------------------------------------------------- the pool
class Sandbox:
    """A pool of sandboxed workers; a context manager. Workers start lazily on first use."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self.n_workers = min(self.config.workers or os.cpu_count() or 1, UID_RANGE // LANES)
        self.isolation = self._resolve_isolation()
        self.grace_s = self.config.grace_s if self.config.grace_s is not None else 1.0 + self.config.timeout_s / 2
        self._root = os.geteuid() == 0
        base = self.config.uid_base
        if base is None:
            base = 10_000_000 + (os.getpid() % 100_000) * UID_RANGE
        self._uid_base = base
        self._plan = bw.mask_plan(bw.interpreter_paths()) if self.isolation == "bwrap" else []
        self._workdirs = bw.private_dirs(self._plan, LANES)
        self._lock = threading.Lock()
        self._slots: list[Slot] = []  # live or starting zygotes
        self._free = list(range(UID_RANGE // LANES))
        self._start_failures = 0
        self._closed = False
        self._helper_ref: list[Helper] = []  # shared with the finalizer
        self._wake_r = self._wake_w = -1
        self._sel: selectors.BaseSelector | None = None
        self._done: Any = None  # the current map's completion callback
        self._warned_seccomp = False
        self._finalizer = weakref.finalize(self, cleanup, self._slots, self._helper_ref)
        self.stats: collections.Counter = collections.Counter()

    # ---------------------------------------------------------------- public
    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def run(self, job: Job) -> SandboxResult:
        """Run one job (see :meth:`map`)."""
        return self.map([job])[0]

    def map(self, jobs: Iterable[Job], *, progress: bool | str = False) -> list[SandboxResult]:
        """Run ``jobs`` in parallel over the workers; results in the order of ``jobs``.

        ``progress``: show a tqdm bar on stderr (a string is its description).
        """
        jobs = list(jobs)
        if not jobs:
            return []
        with self._lock:
            if self._closed:
                raise RuntimeError("Sandbox is closed")
            bar = None
            if progress:
                from tqdm.auto import tqdm

                bar = tqdm(
                    total=len(jobs),
                    desc=progress if isinstance(progress, str) else "sandbox",
                    file=sys.stderr,
                    unit="job",
                    dynamic_ncols=True,
                )
            try:
                return self._map(jobs, bar)
            finally:
                self._abandon_busy()  # after an exception (or Ctrl-C): no stale job may reach the next map
                self._done = None
                if bar is not None:
                    bar.close()

    def close(self) -> None:
        """Stop all workers (idempotent)."""
        if self._closed:
            return
        with self._lock:
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
        return spawn_zygote(slot, self.isolation, self._plan, self._workdirs, limits)

    def _ensure_started(self) -> None:
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

    def _start_failed(self, why: str) -> None:
        self._start_failures += 1
        self.stats["start_failures"] += 1
        if self._start_failures >= MAX_START_FAILURES:
            raise RuntimeError(f"sandbox workers fail to start ({self._start_failures} times): {why}")

    @staticmethod
    def _errlog_tail(slot: Slot) -> str:
        if slot.errlog is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            slot.errlog.seek(0)
            return slot.errlog.read()[-2000:].decode("utf-8", "replace")
        return ""

    # ---------------------------------------------------------------- talking to a zygote
    def _maybe_fork(self, slot: Slot) -> None:
        """Ask the zygote for sample processes in every free lane: the slot keeps ``LANES - 1``
        processes ready (or starting) beside the one running a job, so that a new process's
        start (fork and lock-down, a few ms) is off the path of the jobs."""
        while slot.zygote_ready and not slot.retiring and slot in self._slots:
            lanes = set(range(LANES)) - {c.lane for c in slot.children.values()}
            if not lanes:
                return
            self._fork_one(slot, min(lanes))

    def _fork_one(self, slot: Slot, lane: int) -> None:
        assert self._sel is not None and slot.ctl is not None
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        n = slot.next_n
        slot.next_n += 1
        try:
            socket.send_fds(slot.ctl, [b"fork %d %d" % (n, lane)], [req_r, res_w])
        except OSError:
            os.close(req_w)
            os.close(res_r)
            self._zygote_lost(slot, "zygote unreachable")
            return
        finally:
            os.close(req_r)  # the zygote holds its own copies now
            os.close(res_w)
        os.set_blocking(res_r, False)
        child = Child(n, lane, req_w, res_r)
        slot.children[n] = child
        self.stats["forks"] += 1
        self._sel.register(res_r, selectors.EVENT_READ, ("res", slot, child))

    def _unregister(self, fd: int) -> None:
        assert self._sel is not None
        if fd >= 0:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(fd)

    def _drop_child(self, slot: Slot, child: Child) -> None:
        """SIGKILL the process (through its pidfd) and forget it; its lane is free again."""
        child.kill()
        self._unregister(child.res_r)
        child.close_fds()
        slot.children.pop(child.n, None)

    def _abandon_busy(self) -> None:
        """End every process still running a job of a map that is over (only when it ended by an
        exception): its result would otherwise land in the next map's list at the same index."""
        for slot in list(self._slots):
            for child in list(slot.children.values()):
                if child.job is not None:
                    child.job = None
                    self._drop_child(slot, child)

    def _zygote_lost(self, slot: Slot, why: str) -> None:
        """The zygote died or misbehaved: fail its job as killed, kill its sandbox, reap it."""
        if slot not in self._slots:
            return
        for child in list(slot.children.values()):
            self._drop_child(slot, child)
            if child.job is not None:
                self._finish(child.job, self._killed("WorkerDied", why, child))
        if slot.ctl is not None:
            self._unregister(slot.ctl.fileno())
        self._slots.remove(slot)
        kill_zygote(slot)
        self._helper_ref[0].requests.put(("reap", reap_zygote, slot))
        self.stats["zygote_restarts"] += 1
        if not slot.served:  # died before any sample process of it was ready: a start failure
            self._start_failed(f"{why}: {self._errlog_tail(slot)}")

    def _retire(self, slot: Slot) -> None:
        """Stop a slot's sandbox after ``max_tasks_per_worker`` samples (a new one replaces it)."""
        for child in list(slot.children.values()):
            self._drop_child(slot, child)
        if slot.ctl is not None:
            self._unregister(slot.ctl.fileno())
            with contextlib.suppress(OSError):
                slot.ctl.send(b"stop")
        self._slots.remove(slot)
        self.stats["retired"] += 1
        self._helper_ref[0].requests.put(("reap", stop_and_reap, slot))

    def _on_ctl(self, slot: Slot) -> None:
        assert slot.ctl is not None
        while slot in self._slots:
            try:
                msg, fds, _flags, _addr = socket.recv_fds(slot.ctl, 4096, 1)
            except BlockingIOError:
                return
            except OSError:
                msg, fds = b"", []
            if not msg:
                self._zygote_lost(slot, "worker sandbox exited")
                return
            if not slot.zygote_ready:
                self._on_zygote_ready(slot, msg)
                continue
            word, _, arg = msg.partition(b" ")
            child = slot.children.get(int(arg)) if word == b"forked" and arg.isdigit() and len(fds) == 1 else None
            if child is None or child.pidfd >= 0:
                for fd in fds:
                    os.close(fd)
                if word != b"forked":
                    self._zygote_lost(slot, "unexpected message from the zygote")
                continue  # a process already dropped
            child.pidfd = fds[0]

    def _on_zygote_ready(self, slot: Slot, msg: bytes) -> None:
        try:
            info = json.loads(msg)
            if type(info) is not dict or info.get("ready") is not True:
                raise ValueError
        except ValueError:
            self._zygote_lost(slot, "bad ready message from the zygote")
            return
        slot.zygote_ready = True
        if info.get("seccomp") != "on" and not self._warned_seccomp:
            self._warned_seccomp = True
            log.warning("sandbox: no seccomp filter for samples (%s)", _opt_str(info.get("seccomp"), 100))
        self._maybe_fork(slot)

    # ---------------------------------------------------------------- sample processes
    def _on_result_pipe(self, slot: Slot, child: Child) -> None:
        try:
            chunk = os.read(child.res_r, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:  # the process died or closed its end
            self._end(slot, child, None)
            return
        child.buf += chunk
        try:
            frames = split_frames(child.buf, MAX_RESULT_BYTES)
        except ValueError as exc:
            self._end(slot, child, self._killed("ProtocolError", f"bad frame from worker: {exc}", child))
            return
        for data in frames:
            try:
                msg = _loads_plain(data)
            except Exception as exc:  # malformed or refused: the process is hostile or broken
                why = f"bad frame from worker: {type(exc).__name__}: {exc}"[:500]
                self._end(slot, child, self._killed("ProtocolError", why, child))
                return
            if not self._on_frame(slot, child, msg):
                return

    def _on_frame(self, slot: Slot, child: Child, msg: Any) -> bool:
        """Handle one frame; False when the process was ended by it."""
        if child.job is not None:  # its result: the job is over, whatever the process does next
            if type(msg) is not dict or msg.get("key") != child.key:
                # written by the sample's own code, not by the worker: the worker reads the key
                # before any user code and keeps it where a traced sample cannot reach it
                why = "result frame without the job's key (forged by the sample)"
                self._end(slot, child, self._killed("ProtocolError", why, child))
            else:
                self._end(slot, child, _result_from_frame(msg, self.config.output_limit))
            return False
        if not child.ready and type(msg) is dict and msg.get("ready") is True:
            child.ready = True
            slot.served += 1
            self._start_failures = 0
            return True
        self._end(slot, child, None)  # a frame before any job: not from our code
        return False

    def _end(self, slot: Slot, child: Child, res: SandboxResult | None) -> None:
        """End a process: SIGKILL it, free its lane, complete its job with ``res`` (None: it
        died or closed its pipe without a result), then start the next process of the slot."""
        self._drop_child(slot, child)
        if child.job is not None:
            self._finish(child.job, res or self._no_result(child))
        elif not child.ready:
            self._start_failed(f"sample process ended before ready: {self._errlog_tail(slot)}")
        if slot.retiring and slot.busy() is None:
            self._retire(slot)
        else:
            self._maybe_fork(slot)

    def _killed(self, etype: str, why: str, child: Child) -> SandboxResult:
        return SandboxResult("killed", error_type=etype, error_message=why, duration_s=time.monotonic() - child.t_sent)

    def _no_result(self, child: Child) -> SandboxResult:
        """A process that ended without a result frame: a timeout once its time was up (its
        timer's SIGALRM reset to the default action kills it then), else ``killed``."""
        elapsed = time.monotonic() - child.t_sent
        limit = self.config.timeout_s
        if elapsed >= limit:
            msg = f"exceeded {limit} s (the sample's process ended without a result)"
            return SandboxResult("timeout", error_type="Timeout", error_message=msg, duration_s=elapsed)
        return self._killed("WorkerDied", "the sample's process died (or closed its result pipe)", child)

    def _finish(self, index: int, res: SandboxResult) -> None:
        assert self._done is not None
        self._done(index, res)

    # ---------------------------------------------------------------- the event loop
    def _send_job(self, slot: Slot, index: int, job: Job) -> SandboxResult | None:
        """Send ``job`` to the slot's ready process; a result when the job is refused."""
        if job.runner not in RUNNERS:
            return SandboxResult("error", error_type="UnknownRunner", error_message=f"no runner {job.runner!r}")
        if type(job.source) is not str or len(job.source) > MAX_SOURCE_CHARS:
            return SandboxResult("error", error_type="BadJob", error_message="source must be a str of <= 1e6 chars")
        req = {
            "source": job.source,
            "args": tuple(job.args),
            "kwargs": dict(job.kwargs),
            "entry": job.entry,
            "runner": job.runner,
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

    def _map(self, jobs: list[Job], bar: Any) -> list[SandboxResult]:
        results: list[SandboxResult | None] = [None] * len(jobs)
        todo = collections.deque(range(len(jobs)))
        remaining = len(jobs)

        def done(i: int, res: SandboxResult) -> None:
            nonlocal remaining
            results[i] = res
            remaining -= 1
            self.stats[res.status] += 1
            if bar is not None:
                bar.update(1)

        self._done = done
        for slot in list(self._slots):  # lanes an abandoned map left empty
            self._maybe_fork(slot)
        while remaining:
            self._ensure_started()
            for slot in list(self._slots):
                while todo and slot.can_take():
                    i = todo.popleft()
                    refused = self._send_job(slot, i, jobs[i])
                    if refused is not None:
                        done(i, refused)
            if not remaining:
                break
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
        return results  # type: ignore[return-value]

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
