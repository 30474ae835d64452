"""The zygote of a worker slot (see :mod:`codethinker.sandbox.worker`): its entry point
:func:`main` (called by the bootstrap command of :mod:`codethinker.sandbox.bwrap`), the preloaded
modules, the lock-down of the zygote itself, and the loop that forks one sample process per job."""

from __future__ import annotations

import builtins
import contextlib
import gc
import importlib
import json
import os
import signal
import socket
import sys

from codethinker.sandbox.fs import remove_tree, reset_private_dir
from codethinker.sandbox.lockdown import PR_SET_PDEATHSIG, prctl, seccomp_status, zygote_limits
from codethinker.sandbox.runners import load_runners
from codethinker.sandbox.worker.capture import no_input, on_alarm
from codethinker.sandbox.worker.sample import run_sample

__all__ = ["LANES", "PRELOAD", "main"]

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
            run_sample(self.cfg, lane, fds, [self.ctl.fileno()], self.runners, self.pristine)
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


def main(cfg: dict) -> None:
    """Entry point of the zygote process (see :mod:`codethinker.sandbox.worker`)."""
    sys.path[:] = [p for p in sys.path if p] + list(cfg.get("extra_path", ()))  # no cwd-relative imports
    # every builtin module too: a trace job's process then needs no fresh one (its guard refuses
    # _imp.create_builtin, which makes second copies of gc, _signal or posix)
    for name in (*(PRELOAD_ALL if cfg.get("preload_all") else PRELOAD), *sys.builtin_module_names):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    runners = load_runners(cfg.get("runners", {}))
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
