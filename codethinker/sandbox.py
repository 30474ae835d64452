"""Run untrusted Python (a function source plus an input) in isolated worker processes.

Every job returns a typed :class:`SandboxResult` (``ok`` / ``timeout`` / ``error`` / ``memory`` /
``killed``) and the value as plain builtin data. Each worker slot is its own bubblewrap sandbox
(no network, read-only filesystem, private pid/ipc/uts namespaces, scrubbed environment) holding
a zygote process that forks the worker child; the child runs as the slot's unprivileged uid
under resource limits (address space, file size, no new processes or threads). Samples that a
static check finds *pure* run one after another in the same child with fresh globals; any other
sample, a timeout, a memory error, a crash or a change of interpreter state replaces the child
(one fork, about a millisecond) without losing the batch.

>>> from codethinker.sandbox import Job, Sandbox, SandboxConfig
>>> with Sandbox(SandboxConfig(timeout_s=2.0)) as sb:  # doctest: +SKIP
...     sb.run(Job("def f(x):\\n    return x * 2", args=(21,))).value
...     [r.status for r in sb.map([Job("def f():\\n    while True: pass"), Job("def g(): pass")])]
42
['timeout', 'error']

Limits (see docs/sandbox.md for the threat model and what is NOT protected against):

* wall-clock timeout per sample (``timeout_s``; a timer in the worker, then SIGKILL at
  ``timeout_s + grace_s``), address space ``memory_mb`` beyond the worker's baseline,
  ``output_limit`` bytes of stdout/stderr kept per stream, RLIMIT_NPROC=1 under an
  unprivileged uid (no fork, no threads), RLIMIT_FSIZE, RLIMIT_NOFILE, no core dumps;
* with ``isolation="none"`` (no bubblewrap) network and filesystem are NOT isolated: only the
  uid drop (when running as root), rlimits, scrubbed environment and private temp dir remain;
* use one :class:`Sandbox` from one thread at a time (calls are serialized by a lock);
* str hashes are seeded with ``PYTHONHASHSEED=0``, so set order is the same in every run.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import logging
import os
import pickle
import queue
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from codethinker._sandbox_worker import HEADER, RUNNERS

__all__ = ["RUNNERS", "Job", "Sandbox", "SandboxConfig", "SandboxResult", "bwrap_available"]

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
Status = Literal["ok", "timeout", "error", "memory", "killed"]
STATUSES = frozenset({"ok", "timeout", "error", "memory", "killed"})

MAX_RESULT_BYTES = 64 * 1024 * 1024  # a worker frame larger than this kills the worker
MAX_SOURCE_CHARS = 1_000_000
TMPFS_BYTES = 64 * 1024 * 1024  # size of the sandbox's /tmp and /dev/shm (bwrap)
FSIZE_BYTES = 32 * 1024 * 1024  # RLIMIT_FSIZE
NOFILE = 64  # RLIMIT_NOFILE
NPROC = 1  # RLIMIT_NPROC under the unprivileged uid: the worker itself, no fork, no threads
START_TIMEOUT_S = 60.0  # a worker not ready by then is killed
MAX_START_FAILURES = 3  # consecutive start failures before the sandbox gives up
UID_RANGE = 1000  # uids per Sandbox: base + slot, slot < UID_RANGE
HASH_SEED = 0  # str hashes (so set iteration order) are the same in every worker and every run

_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from codethinker._sandbox_worker import main; main(sys.argv[2])"


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and pool settings of a :class:`Sandbox`."""

    timeout_s: float = field(default=2.0, metadata={"help": "wall-clock limit per sample, seconds"})
    memory_mb: int = field(default=1024, metadata={"help": "address-space cap per worker beyond its baseline, MiB"})
    workers: int | None = field(default=None, metadata={"help": "samples run in parallel (default: os.cpu_count())"})
    output_limit: int = field(default=65536, metadata={"help": "bytes of stdout and of stderr kept per sample"})
    isolation: str = field(
        default="auto",
        metadata={"help": "'bwrap' | 'none' | 'auto' (bwrap when it works here, else none with a warning)"},
    )
    max_tasks_per_worker: int | None = field(
        default=None, metadata={"help": "replace a worker's process after this many samples (None: never)"}
    )
    grace_s: float | None = field(
        default=None,
        metadata={"help": "parent-side SIGKILL after timeout_s + grace_s (default 1 + timeout_s / 2)"},
    )
    uid_base: int | None = field(
        default=None,
        metadata={"help": "first unprivileged uid for workers when root (default derived from the pid)"},
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
class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain builtin data only: every global is refused except ``builtins.complex``
    (pickle has no opcode for complex; calling it with two numbers runs no user code)."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name == "complex":
            return complex
        raise pickle.UnpicklingError(f"global {module}.{name} refused")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent ids refused")


def _loads_plain(data: bytes) -> Any:
    return _PlainUnpickler(io.BytesIO(data)).load()


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


# --------------------------------------------------------------------------- isolation
_BWRAP_OK: dict[str, bool] = {}


def bwrap_available() -> bool:
    """Whether ``bwrap`` is on PATH and can start a sandbox with the namespaces we use."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    if exe not in _BWRAP_OK:
        cmd = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        cmd += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--", "/bin/true"]
        try:
            ok = subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        _BWRAP_OK[exe] = ok
    return _BWRAP_OK[exe]


def _hidden_roots(paths: Iterable[str]) -> list[tuple[str, list[str]]]:
    """For paths the worker must read, the topmost ancestor an unprivileged uid cannot traverse
    (e.g. ``/root`` for a pyenv interpreter) with the paths below it: bwrap mounts an empty
    tmpfs over that ancestor (hiding the rest of it) and binds the paths back read-only."""
    out: dict[str, list[str]] = {}
    for p in sorted({os.path.realpath(p) for p in paths if p}):
        parts = Path(p).parts
        for i in range(2, len(parts) + 1):
            anc = str(Path(*parts[:i]))
            try:
                mode = os.stat(anc).st_mode
            except OSError:
                break
            if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
                out.setdefault(anc, []).append(p)
                break
    # drop roots nested in another root
    roots = sorted(out)
    keep = [r for r in roots if not any(r != o and r.startswith(o + os.sep) for o in roots)]
    return [(r, sorted({q for o in roots if o == r or o.startswith(r + os.sep) for q in out[o]})) for r in keep]


def _traversable(path: str) -> bool:
    """Whether any uid can reach ``path`` (o+x on it and every ancestor)."""
    p = Path(os.path.realpath(path))
    for anc in (p, *p.parents):
        try:
            if not os.stat(anc).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _site_paths() -> list[str]:
    """The parent's site-packages, appended to the worker's path (its site module is skipped)."""
    return [p for p in sys.path if p.endswith("-packages") and os.path.isdir(p)]


def _worker_env() -> dict[str, str]:
    """The whole environment of a zygote (nothing of the parent's)."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(PROJECT_ROOT),
        "PYTHONHASHSEED": str(HASH_SEED),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _interpreter_paths() -> list[str]:
    exe = os.path.realpath(sys.executable)
    return [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.dirname(exe)), str(PROJECT_ROOT)]


# --------------------------------------------------------------------------- slot handle
class _Slot:
    """One worker slot: a zygote process (inside its own bwrap sandbox) and its current child.

    The zygote never runs user code; the child runs the samples. Retiring the child costs one
    fork in the zygote; only a dead zygote costs a new sandbox.
    """

    def __init__(self, index: int, uid: int | None) -> None:
        self.index = index
        self.uid = uid
        self.proc: subprocess.Popen | None = None
        self.ctl: socket.socket | None = None
        self.errlog: Any = None
        self.host_tmp: str | None = None
        self.zygote_ready = False
        self.started = time.monotonic()
        self.gen = 0
        self._reset_child()

    def _reset_child(self) -> None:
        self.req_w = -1
        self.res_r = -1
        self.buf = bytearray()
        self.child_ready = False
        self.child_started = 0.0
        self.busy_job: int | None = None
        self.pure: bool | None = None
        self.last = False
        self.deadline = 0.0
        self.t_sent = 0.0
        self.n_tasks = 0

    @property
    def has_child(self) -> bool:
        return self.res_r >= 0

    def frames(self) -> list[Any]:
        """Complete frames in the buffer, decoded with the restricted unpickler."""
        out = []
        while len(self.buf) >= HEADER.size:
            (n,) = HEADER.unpack_from(self.buf)
            if n > MAX_RESULT_BYTES:
                raise ValueError(f"frame of {n} bytes exceeds {MAX_RESULT_BYTES}")
            if len(self.buf) < HEADER.size + n:
                break
            data = bytes(self.buf[HEADER.size : HEADER.size + n])
            del self.buf[: HEADER.size + n]
            out.append(_loads_plain(data))
        return out

    def close_child_fds(self) -> None:
        for fd in (self.req_w, self.res_r):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._reset_child()


class _Helper(threading.Thread):
    """Starts and reaps zygote processes from one long-lived thread: ``--die-with-parent`` and
    ``PR_SET_PDEATHSIG`` fire when the *thread* that forked the process exits."""

    def __init__(self, wake_w: int) -> None:
        super().__init__(name="codethinker-sandbox-helper", daemon=True)
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.done: queue.SimpleQueue = queue.SimpleQueue()
        self.wake_w = wake_w

    def run(self) -> None:
        while True:
            item = self.requests.get()
            if item is None:
                return
            tag, fn, arg = item
            try:
                res: Any = fn(arg)
            except BaseException as exc:
                res = exc
            self.done.put((tag, arg, res))
            with contextlib.suppress(OSError):
                os.write(self.wake_w, b"x")


def _kill_zygote(slot: _Slot) -> None:
    if slot.ctl is not None:
        with contextlib.suppress(OSError):
            slot.ctl.close()
    proc = slot.proc
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            proc.kill()


def _reap_zygote(slot: _Slot) -> _Slot:
    if slot.proc is not None:
        try:
            slot.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            log.warning("sandbox zygote %d did not exit after SIGKILL", slot.proc.pid)
    if slot.errlog is not None:
        slot.errlog.close()
    if slot.host_tmp:
        shutil.rmtree(slot.host_tmp, ignore_errors=True)
    return slot


# --------------------------------------------------------------------------- the pool
class Sandbox:
    """A pool of sandboxed workers; a context manager. Workers start lazily on first use."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self.n_workers = self.config.workers or os.cpu_count() or 1
        self.isolation = self._resolve_isolation()
        self.grace_s = self.config.grace_s if self.config.grace_s is not None else 1.0 + self.config.timeout_s / 2
        self._root = os.geteuid() == 0
        base = self.config.uid_base
        if base is None:
            base = 10_000_000 + (os.getpid() % 100_000) * UID_RANGE
        self._uid_base = base
        self._lock = threading.Lock()
        self._slots: list[_Slot] = []  # live or starting zygotes
        self._free = list(range(UID_RANGE))
        self._start_failures = 0
        self._closed = False
        self._helper_ref: list[_Helper] = []  # shared with the finalizer
        self._wake_r = self._wake_w = -1
        self._sel: selectors.BaseSelector | None = None
        self._finalizer = weakref.finalize(self, Sandbox._cleanup, self._slots, self._helper_ref)
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
                if bar is not None:
                    bar.close()

    def close(self) -> None:
        """Stop all workers (idempotent)."""
        if self._closed:
            return
        with self._lock:
            self._closed = True
            Sandbox._cleanup(self._slots, self._helper_ref)
            if self._sel is not None:
                self._sel.close()
            for fd in (self._wake_r, self._wake_w):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._finalizer.detach()

    @staticmethod
    def _cleanup(slots: list[_Slot], helper_ref: list[_Helper]) -> None:
        """Stop the helper (after its pending starts and reaps), then every zygote and child."""
        for h in helper_ref:
            h.requests.put(None)
            h.join(timeout=60)
            while True:
                try:
                    tag, _arg, res = h.done.get_nowait()
                except queue.Empty:
                    break
                if tag == "spawn" and isinstance(res, _Slot) and res not in slots:
                    slots.append(res)
        helper_ref.clear()
        for slot in slots:
            slot.close_child_fds()
            if slot.ctl is not None:
                with contextlib.suppress(OSError):
                    slot.ctl.send(b"stop")  # the zygote kills its child and exits
        deadline = time.monotonic() + 1.0
        for slot in slots:
            if slot.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    slot.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            _kill_zygote(slot)
            _reap_zygote(slot)
        slots.clear()

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

    def _command(self, cfg: dict) -> list[str]:
        # no -E: the environment is ours (scrubbed), and PYTHONHASHSEED makes set order reproducible
        py = [sys.executable, "-B", "-S", "-c", _BOOT, str(PROJECT_ROOT), json.dumps(cfg)]
        if self.isolation == "none":
            return py
        cmd = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        cmd += ["--size", str(TMPFS_BYTES), "--tmpfs", "/tmp", "--size", str(TMPFS_BYTES), "--tmpfs", "/dev/shm"]
        for hidden, keep in _hidden_roots(_interpreter_paths()):
            cmd += ["--perms", "0755", "--tmpfs", hidden]
            made: set[str] = set()
            for p in keep:
                rel = Path(p).relative_to(hidden).parts
                for i in range(1, len(rel)):
                    d = str(Path(hidden, *rel[:i]))
                    if d not in made:
                        made.add(d)
                        cmd += ["--perms", "0755", "--dir", d]
                cmd += ["--ro-bind", p, p]
        cmd += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        cmd += ["--die-with-parent", "--new-session", "--clearenv"]
        for key, value in _worker_env().items():
            cmd += ["--setenv", key, value]
        cmd += ["--chdir", "/tmp", "--"]
        return cmd + py

    def _spawn(self, slot: _Slot) -> _Slot:  # runs on the helper thread
        """Start the zygote of ``slot``."""
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if self.isolation == "none":
            slot.host_tmp = tempfile.mkdtemp(prefix="codethinker-sbx-")
            os.chmod(slot.host_tmp, 0o711)  # the child's uid may pass through, not list or write
            workdir = os.path.join(slot.host_tmp, "work")
        else:
            workdir = "/tmp/work"
        cfg = {
            "ctl_fd": child_end.fileno(),
            "uid": slot.uid,
            "workdir": workdir,
            "memory_mb": self.config.memory_mb,
            "fsize": FSIZE_BYTES,
            "nofile": NOFILE,
            "nproc": NPROC,
            "pdeathsig": self.isolation == "none",
            "parent_pid": os.getpid(),
            "preload_all": self.isolation == "none" and self._root and not _traversable(sysconfig.get_path("stdlib")),
            "extra_path": _site_paths(),
        }
        slot.errlog = tempfile.TemporaryFile()  # noqa: SIM115 (closed when the slot is reaped)
        try:
            slot.proc = subprocess.Popen(
                self._command(cfg),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=slot.errlog,
                pass_fds=(child_end.fileno(),),
                env=_worker_env(),
                cwd="/",
                start_new_session=True,
            )
        except BaseException:
            parent_end.close()
            raise
        finally:
            child_end.close()
        parent_end.setblocking(False)
        slot.ctl = parent_end
        slot.started = time.monotonic()
        return slot

    def _ensure_started(self) -> None:
        if not self._helper_ref:
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_r, False)
            os.set_blocking(self._wake_w, False)
            self._sel = selectors.DefaultSelector()
            self._sel.register(self._wake_r, selectors.EVENT_READ, None)
            helper = _Helper(self._wake_w)
            self._helper_ref.append(helper)
            helper.start()
        while len(self._slots) < self.n_workers and self._free:
            index = self._free.pop(0)
            slot = _Slot(index, self._uid_base + index if self._root else None)
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
            elif isinstance(res, _Slot):
                if slot in self._slots:
                    assert slot.ctl is not None
                    self._sel.register(slot.ctl, selectors.EVENT_READ, ("ctl", slot))
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

    def _fork_child(self, slot: _Slot) -> None:
        """Ask the zygote for a fresh child (it kills and reaps the previous one first)."""
        assert self._sel is not None and slot.ctl is not None
        if slot.has_child:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(slot.res_r)
            slot.close_child_fds()
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        try:
            socket.send_fds(slot.ctl, [b"fork"], [req_r, res_w])
        except OSError:
            os.close(req_w)
            os.close(res_r)
            self._zygote_lost(slot, "zygote unreachable")
            return
        finally:
            os.close(req_r)  # the zygote holds its own copies now
            os.close(res_w)
        os.set_blocking(res_r, False)
        slot.req_w, slot.res_r = req_w, res_r
        slot.child_started = time.monotonic()
        slot.gen += 1
        self.stats["forks"] += 1
        self._sel.register(res_r, selectors.EVENT_READ, ("res", slot))

    def _zygote_lost(self, slot: _Slot, why: str, done: Any = None) -> None:
        """The zygote died or misbehaved: fail its job as killed, kill its sandbox, reap it."""
        assert self._sel is not None
        i = slot.busy_job
        if slot.has_child:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(slot.res_r)
        if slot.ctl is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(slot.ctl)
        t_sent = slot.t_sent
        slot.close_child_fds()
        if slot in self._slots:
            self._slots.remove(slot)
        _kill_zygote(slot)
        self._helper_ref[0].requests.put(("reap", _reap_zygote, slot))
        self.stats["zygote_restarts"] += 1
        if not slot.zygote_ready:
            self._start_failed(f"{why}: {self._errlog_tail(slot)}")
        if i is not None and done is not None:
            done(
                i,
                SandboxResult(
                    "killed", error_type="WorkerDied", error_message=why, duration_s=time.monotonic() - t_sent
                ),
            )

    @staticmethod
    def _errlog_tail(slot: _Slot) -> str:
        if slot.errlog is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            slot.errlog.seek(0)
            return slot.errlog.read()[-2000:].decode("utf-8", "replace")
        return ""

    # ---------------------------------------------------------------- the event loop
    def _send_job(self, slot: _Slot, index: int, job: Job) -> SandboxResult | None:
        """Send ``job`` to the idle child of ``slot``; a result when the job is refused."""
        if job.runner not in RUNNERS:
            return SandboxResult("error", error_type="UnknownRunner", error_message=f"no runner {job.runner!r}")
        if type(job.source) is not str or len(job.source) > MAX_SOURCE_CHARS:
            return SandboxResult("error", error_type="BadJob", error_message="source must be a str of <= 1e6 chars")
        cap = self.config.max_tasks_per_worker
        req = {
            "source": job.source,
            "args": tuple(job.args),
            "kwargs": dict(job.kwargs),
            "entry": job.entry,
            "runner": job.runner,
            "options": dict(job.options),
            "timeout": float(self.config.timeout_s),
            "output_limit": int(self.config.output_limit),
            "last": cap is not None and slot.n_tasks + 1 >= cap,
        }
        try:
            data = pickle.dumps(req, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            return SandboxResult("error", error_type="BadJob", error_message=f"job not picklable: {exc}"[:500])
        slot.n_tasks += 1
        slot.busy_job = index
        slot.pure = None
        slot.last = req["last"]
        slot.t_sent = time.monotonic()
        slot.deadline = slot.t_sent + self.config.timeout_s + self.grace_s
        try:
            view = memoryview(HEADER.pack(len(data)) + data)
            while view:
                view = view[os.write(slot.req_w, view) :]
        except OSError:
            pass  # the child died: its result pipe reports EOF and the job gets "killed"
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

        while remaining:
            self._ensure_started()
            for slot in self._slots:
                if not todo:
                    break
                if slot.child_ready and slot.busy_job is None:
                    i = todo.popleft()
                    refused = self._send_job(slot, i, jobs[i])
                    if refused is not None:
                        done(i, refused)
            if not remaining:
                break
            now = time.monotonic()
            deadlines = [s.deadline for s in self._slots if s.busy_job is not None]
            deadlines += [s.started + START_TIMEOUT_S for s in self._slots if not s.zygote_ready]
            deadlines += [s.child_started + START_TIMEOUT_S for s in self._slots if s.has_child and not s.child_ready]
            timeout = min(1.0, max(0.0, min(deadlines) - now)) if deadlines else 1.0
            assert self._sel is not None
            for key, _ in self._sel.select(timeout=timeout):
                if key.data is None:
                    self._on_helper()
                    continue
                kind, slot = key.data
                if slot not in self._slots:
                    continue
                if kind == "ctl":
                    self._on_ctl(slot, done)
                elif slot.has_child and key.fd == slot.res_r:
                    self._on_result_pipe(slot, done)
            now = time.monotonic()
            for slot in list(self._slots):
                if slot.busy_job is not None and now > slot.deadline:
                    i = slot.busy_job
                    slot.busy_job = None
                    self.stats["hard_kills"] += 1
                    done(
                        i,
                        SandboxResult(
                            "timeout",
                            error_type="Timeout",
                            error_message=f"killed after {self.config.timeout_s + self.grace_s:.2f} s",
                            duration_s=now - slot.t_sent,
                        ),
                    )
                    self._fork_child(slot)
                elif not slot.zygote_ready and now > slot.started + START_TIMEOUT_S and slot.ctl is not None:
                    self._zygote_lost(slot, f"worker not ready after {START_TIMEOUT_S} s")
                elif slot.has_child and not slot.child_ready and now > slot.child_started + START_TIMEOUT_S:
                    self._start_failed(f"worker child not ready after {START_TIMEOUT_S} s")
                    self._fork_child(slot)
        return results  # type: ignore[return-value]

    def _on_ctl(self, slot: _Slot, done: Any) -> None:
        assert slot.ctl is not None
        try:
            msg = slot.ctl.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            msg = b""
        if not msg:
            self._zygote_lost(slot, "worker sandbox exited", done)
            return
        if not slot.zygote_ready:
            slot.zygote_ready = True
            self._fork_child(slot)
            return
        self._zygote_lost(slot, "unexpected message from the zygote", done)

    def _on_result_pipe(self, slot: _Slot, done: Any) -> None:
        try:
            chunk = os.read(slot.res_r, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            slot.buf += chunk
            try:
                frames = slot.frames()
            except Exception as exc:  # oversized or malformed frame: the child is hostile or broken
                self._child_lost(slot, done, "ProtocolError", f"bad frame from worker: {exc}"[:500])
                return
            gen = slot.gen
            for msg in frames:
                if slot.gen != gen or slot not in self._slots:
                    return  # retired while handling an earlier frame
                self._on_frame(slot, msg, done)
            return
        # EOF: the child died
        if not slot.child_ready:
            self._start_failed(f"worker child exited before ready: {self._errlog_tail(slot)}")
            self._fork_child(slot)
            return
        self._child_lost(slot, done, None, None)

    def _child_lost(self, slot: _Slot, done: Any, etype: str | None, emsg: str | None) -> None:
        i = slot.busy_job
        t_sent = slot.t_sent
        self.stats["recycled"] += 1
        self._fork_child(slot)
        if i is not None:
            done(
                i,
                SandboxResult(
                    "killed",
                    error_type=etype or "WorkerDied",
                    error_message=emsg or "the worker died during the sample",
                    duration_s=time.monotonic() - t_sent,
                ),
            )

    def _on_frame(self, slot: _Slot, msg: Any, done: Any) -> None:
        if not slot.child_ready:
            if type(msg) is dict and msg.get("ready") is True:
                slot.child_ready = True
                self._start_failures = 0
            else:
                self._start_failed("worker sent a bad ready frame")
                self._fork_child(slot)
            return
        if slot.busy_job is None:  # frames nobody asked for: a hostile child
            self.stats["recycled"] += 1
            self._fork_child(slot)
            return
        if slot.pure is None:  # the verdict frame, sent before any user code ran
            if type(msg) is not dict or type(msg.get("pure")) is not bool:
                self._child_lost(slot, done, "ProtocolError", "bad verdict frame")
                return
            slot.pure = msg["pure"]
            if not slot.pure:
                self.stats["impure"] += 1
            return
        i = slot.busy_job
        slot.busy_job = None
        res = _result_from_frame(msg, self.config.output_limit)
        done(i, res)
        dirty = type(msg) is dict and msg.get("dirty")
        if dirty:
            self.stats["dirty"] += 1
            log.debug("recycling a worker: %s", _opt_str(dirty, 200))
        if not slot.pure or dirty or slot.last or res.status in ("timeout", "memory", "killed"):
            self.stats["recycled"] += 1
            self._fork_child(slot)
