"""The zygote and sample processes of :mod:`codethinker.sandbox` (they run INSIDE the sandbox).

Not public API. The parent starts one *zygote* per worker slot, as ``python -B -S -c BOOT``
with its JSON configuration on stdin (inside bubblewrap unless isolation is "none"). The
zygote imports what samples and runners need and then never runs user code. Every sample runs
in a process of its own, forked from the zygote:

* ``fork N L`` from the parent (a SOCK_SEQPACKET socket carrying the two pipe ends of the new
  process): the zygote makes sure the previous process of *lane* ``L`` is dead and reaped,
  empties and recreates the lane's private dir, forks, and hands the parent a pidfd of the new
  process. There are ``LANES`` (3) lanes per slot, each with its own unprivileged uid and
  private dir, so the sample that runs and the next processes (forked while it runs) never
  share a uid or a dir.
  The new process locks itself down (:mod:`codethinker._sandbox_lockdown`), sends a ready frame
  and waits for one job.
* It runs that one job, sends one result frame and exits; it never serves a second job. The
  parent SIGKILLs it through the pidfd as soon as the frame is in (or at the hard time limit,
  or when its result pipe closes), so a sample that sent a frame early and kept running stops
  there, and the next job goes to a ready process of another lane at once: one round trip per
  job.
* Nothing of a sample reaches the next one: the next process was forked from the zygote, which
  never ran user code (no memory, finalizers, registries or hooks of earlier samples), its dir
  is new, and the lane dirs sit in root-owned parents that only the lane's gid may traverse.

Pipes: request (parent -> sample): 8-byte little-endian length, then a pickle (the parent is
trusted, so the ordinary unpickler is used); result (sample -> parent): the same framing around
the bounded wire format of :mod:`codethinker._wire` (JSON with tags; no pickle), encoded by
:func:`_send` only and decoded by the parent's :func:`codethinker._wire.decode` only. The pipes
are not fds 0/1/2, so C-level writes to stdout/stderr cannot corrupt them.

Only the standard library, the ``_sandbox_*`` helpers and :mod:`codethinker.contra.values` are
imported here (and the runners in ``RUNNERS``, tolerantly): this module must stay lean and must
not import :mod:`codethinker.sandbox`.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import importlib
import json
import os
import pickle
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

from codethinker import _wire
from codethinker._sandbox_capture import ACTIVE, Capped, SandboxTimeout, no_input, on_alarm, safe_text, type_name
from codethinker._sandbox_fs import remove_tree, reset_private_dir
from codethinker._sandbox_lockdown import PR_SET_PDEATHSIG, lock_down, prctl, seccomp_status, zygote_limits
from codethinker.contra.values import canonicalize

__all__ = ["HEADER", "LANES", "PRELOAD", "RUNNERS", "main", "run_call"]

HEADER = struct.Struct("<Q")
MAX_MESSAGE = 256 * 1024 * 1024  # a request larger than this is refused
LANES = 3  # processes per slot at once: the running sample and the next ones, forked in advance

# Imported by the zygote, so that samples importing them pay nothing (CRUXEval's imports).
PRELOAD = (
    "bisect",
    "cmath",
    "collections",
    "collections.abc",
    "copy",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "math",
    "numbers",
    "operator",
    "re",
    "string",
    "textwrap",
    "typing",
)
# With isolation "none" as root the interpreter's files may be unreadable by the sample's uid:
# more modules are imported before the privilege drop.
PRELOAD_ALL = (
    *PRELOAD,
    *("random", "datetime", "time", "json", "decimal", "statistics", "array", "unicodedata", "hashlib"),
    *("base64", "dataclasses", "enum", "abc", "types", "io", "struct", "threading", "traceback", "weakref"),
)

RUNNERS: dict[str, Any] = {
    "call": "codethinker._sandbox_worker:run_call",
    "trace": "codethinker.contra.tracer:trace_runner",
    "tests": "codethinker.evaluation.codegen_runner:tests_runner",
    "reval": "codethinker.evaluation.reval_runner:reval_runner",
}


# --------------------------------------------------------------------------- runners
def run_call(fn: Callable[..., Any], args: tuple, kwargs: dict, options: dict) -> Any:
    """The ``"call"`` runner: the canonical literal form of ``fn(*args, **kwargs)``."""
    return canonicalize(fn(*args, **kwargs))


def _load_runners() -> dict[str, Callable[..., Any] | str]:
    """Resolve ``RUNNERS``; a runner whose module is missing maps to the error text."""
    out: dict[str, Callable[..., Any] | str] = {}
    for name, spec in RUNNERS.items():
        if callable(spec):
            out[name] = spec
            continue
        mod_name, _, attr = spec.partition(":")
        try:
            out[name] = getattr(importlib.import_module(mod_name), attr)
        except BaseException as exc:
            out[name] = f"runner {name!r} ({spec}) is unavailable: {type(exc).__name__}: {exc}"[:500]
    return out


# --------------------------------------------------------------------------- pipes
def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


FALLBACK_OUTPUT_CHARS = 64 * 1024  # stdout/stderr kept in a ResultNotSerializable frame


def _recv_request(fd: int) -> dict | None:
    """One job frame from the (trusted) parent; None on EOF or an oversized frame."""
    head = _read_exact(fd, HEADER.size)
    if head is None:
        return None
    (n,) = HEADER.unpack(head)
    data = _read_exact(fd, n) if n <= MAX_MESSAGE else None
    return None if data is None else pickle.loads(data)


def _send(fd: int, obj: Any) -> None:
    """Encode and write one frame to the parent (the single place frames are encoded): the
    bounded wire format of :mod:`codethinker._wire`, never pickle, so the parent's decoding is
    linear and builds at most O(frame) objects whatever the sample returns."""
    data = _wire.encode(obj)
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _reply(fd: int, result: dict, key: str) -> None:
    """Send the job's result with its key (a frame the sample writes itself lacks the key)."""
    result["key"] = key
    try:
        _send(fd, result)
    except (TypeError, ValueError, AttributeError, RecursionError, MemoryError) as exc:  # WireError is a ValueError
        fallback = {k: result[k] for k in ("stdout", "stderr", "duration_s", "key")}
        for k in ("stdout", "stderr"):  # escaped text can take 12 bytes a character: keep the frame small
            fallback[k] = fallback[k][:FALLBACK_OUTPUT_CHARS]
        _send(
            fd, {"status": "error", "error_type": "ResultNotSerializable", "error_message": safe_text(exc), **fallback}
        )


# --------------------------------------------------------------------------- one sample
def _execute(req: dict, runners: dict, pristine: dict) -> tuple[str, Any, str | None, str | None]:
    """Compile and run the source into fresh globals, then the runner on the entry function."""
    code = compile(req["source"], "<sample>", "exec", dont_inherit=True)
    g: dict[str, Any] = {"__builtins__": dict(pristine), "__name__": "__sandbox__"}
    exec(code, g)
    fn = g.get(req["entry"])
    runner = runners.get(req["runner"])
    if fn is None:
        return "error", None, "EntryNotFound", f"no function {req['entry']!r} defined"
    if not callable(runner):
        return "error", None, "RunnerUnavailable", str(runner or req["runner"])
    return "ok", runner(fn, req["args"], req["kwargs"], req["options"]), None, None


_BUILTINS = dict(vars(builtins))  # as the zygote imported them: the sample may replace any


def _restore_interpreter() -> None:
    """Undo what a sample may have done to the interpreter that would break the report of its
    own result (replaced builtins such as ``len``, trace hooks). Nothing of it outlives the
    process anyway."""
    sys.settrace(None)
    sys.setprofile(None)
    bd = vars(builtins)
    bd.clear()
    bd.update(_BUILTINS)


def _run_job(req: dict, runners: dict, pristine: dict) -> dict[str, Any]:
    """Run one job under the timer with captured output; the result frame as a dict."""
    out, err = Capped(req["output_limit"]), Capped(req["output_limit"])
    sys.stdout, sys.stderr = out, err
    limit = req["timeout"]
    timed_out = ("timeout", None, "Timeout", f"exceeded {limit} s")
    t0 = time.perf_counter()
    try:
        signal.setitimer(signal.ITIMER_REAL, limit, 0.05)
        ACTIVE[0] = True
        try:
            status, value, etype, emsg = _execute(req, runners, pristine)
            ACTIVE[0] = False
        except SandboxTimeout:
            ACTIVE[0] = False
            status, value, etype, emsg = timed_out
        except MemoryError as exc:
            ACTIVE[0] = False
            status, value, etype, emsg = "memory", None, "MemoryError", safe_text(exc)
        except BaseException as exc:  # user errors, SystemExit, KeyboardInterrupt ...
            ACTIVE[0] = False
            status, value, etype, emsg = "error", None, type_name(exc), safe_text(exc)
    except SandboxTimeout:  # fired between the user code and the flag reset
        status, value, etype, emsg = timed_out
    finally:
        ACTIVE[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
    duration = time.perf_counter() - t0
    _restore_interpreter()
    if status != "timeout" and duration > limit:  # the sample swallowed the timer's exception
        status, value, etype, emsg = timed_out
    return {
        "status": status,
        "value": value,
        "error_type": etype,
        "error_message": emsg,
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "duration_s": duration,
    }


def _sample(cfg: dict, lane: int, fds: list[int], own: list[int], runners: dict, pristine: dict) -> NoReturn:
    """The life of a sample process: lock down, announce, run one job, exit."""
    code = 0
    try:
        for fd in own:  # the zygote's control socket
            os.close(fd)
        req_fd, res_fd = fds
        uid = cfg["uids"][lane] if cfg["uids"] else None
        lock_down(cfg, cfg["workdirs"][lane], uid)
        sys.stdout = sys.__stdout__ = Capped(0)  # type: ignore[misc]
        sys.stderr = sys.__stderr__ = Capped(0)  # type: ignore[misc]
        _send(res_fd, {"ready": True})
        req = _recv_request(req_fd)
        if req is not None:
            key = req.pop("key", "")  # only in this frame's locals while user code runs
            _prepare_runner(runners.get(req.get("runner")))
            _reply(res_fd, _run_job(req, runners, pristine), key)
    except BaseException as exc:
        code = 5
        with contextlib.suppress(BaseException):
            os.write(2, f"sample process failed: {type(exc).__name__}: {exc}\n".encode()[:2000])
    os._exit(code)


# --------------------------------------------------------------------------- the zygote
class _Zygote:
    """Forks the sample processes of one slot, one per job; never runs user code.

    ``fork N L`` (with the two pipe ends): SIGKILL and reap the previous process of lane ``L``
    (the parent has ended it already), empty and recreate the lane's private dir, fork, and
    answer ``forked N`` with a pidfd of the new process, through which the parent kills it the
    moment its job is over. ``stop``: kill and reap everything, remove the dirs, exit.
    """

    def __init__(self, cfg: dict, ctl: socket.socket, runners: dict, pristine: dict) -> None:
        self.cfg, self.ctl, self.runners, self.pristine = cfg, ctl, runners, pristine
        self.lanes: dict[int, int] = {}  # lane -> pid of its last process (not reaped yet)

    def _uid(self, lane: int) -> int | None:
        return self.cfg["uids"][lane] if self.cfg["uids"] else None

    def run(self) -> None:
        for lane, workdir in enumerate(self.cfg["workdirs"]):
            _make_lane(os.path.dirname(workdir), self._uid(lane))
        while True:
            try:
                msg, fds, _flags, _addr = socket.recv_fds(self.ctl, 64, 2)
            except InterruptedError:
                continue
            word, *args = msg.split(b" ")
            if word == b"fork" and len(fds) == 2 and len(args) == 2:
                self._fork(int(args[0]), int(args[1]), fds)
                continue
            for fd in fds:
                os.close(fd)
            self._stop()  # b"stop", or b"" (the parent is gone)
            return

    def _end_lane(self, lane: int) -> None:
        pid = self.lanes.pop(lane, None)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # not reaped yet, so the pid is still this process
            os.waitpid(pid, 0)

    def _fork(self, n: int, lane: int, fds: list[int]) -> None:
        if lane not in range(LANES):
            raise ValueError(f"no lane {lane}")
        self._end_lane(lane)
        reset_private_dir(self.cfg["workdirs"][lane], self._uid(lane))
        gc.freeze()  # the sample's collector then never walks (and copies) the zygote's objects
        pid = os.fork()
        if pid == 0:
            _sample(self.cfg, lane, fds, [self.ctl.fileno()], self.runners, self.pristine)
        self.lanes[lane] = pid
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        try:
            socket.send_fds(self.ctl, [b"forked %d" % n], [pidfd])
        finally:
            os.close(pidfd)

    def _stop(self) -> None:
        for lane in list(self.lanes):
            self._end_lane(lane)
        for workdir in self.cfg["workdirs"]:
            remove_tree(os.path.dirname(workdir))


def _make_lane(path: str, uid: int | None) -> None:
    """The lane's parent dir: root-owned, mode 0710, group = the lane's gid, so only the lane's
    samples can pass through it to their private dir, and none of them can open it to others
    (a sample may chmod its own dir 0777; the parent dir keeps other lanes out)."""
    remove_tree(path)
    os.mkdir(path, 0o700)
    if uid is not None and os.geteuid() == 0:
        os.chown(path, 0, uid)
        os.chmod(path, 0o710)


def _close_strays(keep: tuple[int, ...]) -> None:
    """Close every inherited descriptor but ``keep`` (bwrap's --args file, for example)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _prepare() -> None:
    """Process state every sample inherits: environment, signal dispositions."""
    os.environ.clear()
    os.environ.update({"HOME": "/", "TMPDIR": "/", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over-size writes fail with EFBIG instead
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGALRM, on_alarm)  # harmless in the zygote: it never arms the timer


def _prepare_runner(runner: Any) -> None:
    """Let the job's runner module set up the sample's process after its lock-down and before any
    user code (its optional ``prepare_process()``; the tracer installs its guard there, so a
    sample's module-level code already runs under it)."""
    module = sys.modules.get(getattr(runner, "__module__", "") or "")
    prepare = getattr(module, "prepare_process", None)
    if callable(prepare):
        prepare()


def main(cfg: dict) -> None:
    """Entry point of the zygote process (see the module docstring)."""
    sys.path[:] = [p for p in sys.path if p] + list(cfg.get("extra_path", ()))  # no cwd-relative imports
    for name in PRELOAD_ALL if cfg.get("preload_all") else PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    runners = _load_runners()
    pristine = dict(vars(builtins))
    pristine["input"] = no_input
    if cfg.get("pdeathsig"):
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # isolation "none"; bwrap's --die-with-parent does it otherwise
        if os.getppid() != cfg["parent_pid"]:
            os._exit(3)
    cfg["zygote_pid"] = os.getpid()
    _prepare()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    os.close(devnull)
    _close_strays((0, 1, 2, cfg["ctl_fd"]))
    ctl = socket.socket(fileno=cfg["ctl_fd"])
    seccomp, seccomp_word = seccomp_status()
    if seccomp is not None:
        seccomp.install()  # inherited by every sample (a filter cannot be removed); OSError: no start
    cfg["ipc_private"] = seccomp is None  # without the filter, each sample gets its own IPC namespace
    gc.collect()
    gc.freeze()
    zygote_limits(cfg)
    available = sorted(k for k, v in runners.items() if callable(v))
    ctl.send(json.dumps({"ready": True, "runners": available, "seccomp": seccomp_word}).encode())
    _Zygote(cfg, ctl, runners, pristine).run()
