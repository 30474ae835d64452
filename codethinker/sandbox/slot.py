"""Parent-side bookkeeping of :mod:`codethinker.sandbox`: worker slots, sample processes, starting
and stopping zygotes (from the helper thread), and the framing of the result pipes.

Not public API. A :class:`Slot` is one bubblewrap sandbox holding a zygote; its
:class:`Child` objects are the sample processes the zygote forked for it (at most ``LANES``
at once: the one running a job and the next ones, forked in advance).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import sysconfig
import tempfile
import threading
import time
from typing import Any

from codethinker.sandbox import bwrap as bw
from codethinker.sandbox.fs import remove_tree
from codethinker.sandbox.worker.main import LANES
from codethinker.sandbox.worker.pipes import HEADER

__all__ = [
    "Child",
    "Helper",
    "Slot",
    "cleanup",
    "kill_zygote",
    "reap_zygote",
    "spawn_zygote",
    "split_frames",
    "stop_and_reap",
]

log = logging.getLogger("codethinker.sandbox")


def split_frames(buf: bytearray, limit: int) -> list[bytes]:
    """Remove and return the complete frames at the start of ``buf`` (8-byte length + payload);
    ``ValueError`` when a frame announces more than ``limit`` bytes."""
    out = []
    while len(buf) >= HEADER.size:
        (n,) = HEADER.unpack_from(buf)
        if n > limit:
            raise ValueError(f"frame of {n} bytes exceeds {limit}")
        if len(buf) < HEADER.size + n:
            break
        out.append(bytes(buf[HEADER.size : HEADER.size + n]))
        del buf[: HEADER.size + n]
    return out


class Child:
    """One sample process: its lane, its pidfd, its two pipe ends and its job."""

    def __init__(self, n: int, lane: int, req_w: int, res_r: int) -> None:
        self.n = n
        self.lane = lane
        self.req_w = req_w
        self.res_r = res_r
        self.pidfd = -1  # from the zygote's "forked" message
        self.buf = bytearray()
        self.born = time.monotonic()
        self.ready = False
        self.job: int | None = None  # index of the job it runs
        self.key = ""  # the job's key: its result frame must carry it
        self.t_sent = 0.0
        self.deadline = 0.0

    def kill(self) -> None:
        """SIGKILL the process (it can run no more user code once this returns)."""
        if self.pidfd >= 0:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def close_fds(self) -> None:
        for fd in (self.req_w, self.res_r, self.pidfd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.req_w = self.res_r = self.pidfd = -1


class Slot:
    """One worker slot: a zygote process inside its own sandbox, and its sample processes."""

    def __init__(self, index: int, uids: list[int] | None) -> None:
        self.index = index
        self.uids = uids
        self.proc: subprocess.Popen | None = None
        self.ctl: socket.socket | None = None
        self.errlog: Any = None
        self.host_tmp: str | None = None
        self.zygote_ready = False
        self.started = time.monotonic()
        self.next_n = 0
        self.children: dict[int, Child] = {}
        self.n_tasks = 0  # jobs sent
        self.served = 0  # sample processes that became ready
        self.retiring = False

    def busy(self) -> Child | None:
        return next((c for c in self.children.values() if c.job is not None), None)

    def spare(self) -> Child | None:
        """The oldest process that is ready for a job (and killable), if any."""
        return next((c for c in self.children.values() if c.job is None and c.ready and c.pidfd >= 0), None)

    def can_take(self) -> bool:
        """A job can start now: nothing running and a spare process ready."""
        if not self.zygote_ready or self.retiring or self.busy() is not None:
            return False
        return self.spare() is not None

    def close_child_fds(self) -> None:
        for child in self.children.values():
            child.kill()
            child.close_fds()
        self.children.clear()


class Helper(threading.Thread):
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


def kill_zygote(slot: Slot) -> None:
    """SIGKILL the slot's sandbox (its process group) and close the control socket."""
    if slot.ctl is not None:
        with contextlib.suppress(OSError):
            slot.ctl.close()
    proc = slot.proc
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            proc.kill()


def reap_zygote(slot: Slot) -> Slot:
    """Wait for the killed sandbox; remove its host temp dir (isolation "none"), any depth."""
    if slot.proc is not None:
        try:
            slot.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            log.warning("sandbox zygote %d did not exit after SIGKILL", slot.proc.pid)
    if slot.errlog is not None:
        slot.errlog.close()
    if slot.host_tmp:
        try:
            remove_tree(slot.host_tmp)
        except OSError as exc:
            log.warning("could not remove the sandbox's temp dir %s: %s", slot.host_tmp, exc)
    return slot


def stop_and_reap(slot: Slot) -> Slot:
    """Give a zygote told to ``stop`` a moment to clean up, then kill and reap its sandbox."""
    if slot.proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            slot.proc.wait(timeout=5)
    kill_zygote(slot)
    return reap_zygote(slot)


def cleanup(slots: list[Slot], helper_ref: list[Helper]) -> None:
    """Stop the helper (after its pending starts and reaps), then every zygote and process."""
    for h in helper_ref:
        h.requests.put(None)
        h.join(timeout=60)
        while True:
            try:
                tag, _arg, res = h.done.get_nowait()
            except queue.Empty:
                break
            if tag == "spawn" and isinstance(res, Slot) and res not in slots:
                slots.append(res)
    helper_ref.clear()
    for slot in slots:
        slot.close_child_fds()
        if slot.ctl is not None:
            with contextlib.suppress(OSError):
                slot.ctl.send(b"stop")  # the zygote kills its processes, empties its dirs and exits
    deadline = time.monotonic() + 1.0
    for slot in slots:
        if slot.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                slot.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        kill_zygote(slot)
        reap_zygote(slot)
    slots.clear()


def _zygote_config(
    slot: Slot, isolation: str, workdirs: list[str], limits: dict, runners: dict[str, str], ctl_fd: int
) -> dict[str, Any]:
    if isolation == "none":
        slot.host_tmp = tempfile.mkdtemp(prefix="codethinker-sbx-")
        os.chmod(slot.host_tmp, 0o711)  # the samples' uids may pass through, not list or write
        workdirs = [os.path.join(slot.host_tmp, f"lane{lane}", "work") for lane in range(LANES)]
    root = os.geteuid() == 0
    return {
        **limits,
        "root": str(bw.PROJECT_ROOT),
        "ctl_fd": ctl_fd,
        "uids": slot.uids,
        "workdirs": workdirs,
        "pdeathsig": isolation == "none",
        "parent_pid": os.getpid(),
        "preload_all": isolation == "none" and root and not bw.traversable(sysconfig.get_path("stdlib")),
        "extra_path": bw.site_paths(),
        "runners": runners,  # name -> "module:attr", imported by the zygote (sandbox.runners)
    }


def spawn_zygote(
    slot: Slot,
    isolation: str,
    bwrap_args: list[str],
    workdirs: list[str],
    limits: dict,
    runners: dict[str, str],
) -> Slot:
    """Start the zygote of ``slot`` (on the helper thread): its JSON configuration on stdin,
    bwrap's options on a file descriptor (``--args``), so neither shows in a command line."""
    parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    files: list[Any] = []
    try:
        cfg_file = tempfile.TemporaryFile()  # noqa: SIM115 (closed below)
        files.append(cfg_file)
        cfg = _zygote_config(slot, isolation, workdirs, limits, runners, child_end.fileno())
        cfg_file.write(json.dumps(cfg).encode())
        cfg_file.seek(0)
        cmd = bw.zygote_command()
        pass_fds = [child_end.fileno()]
        if isolation == "bwrap":
            args_file = tempfile.TemporaryFile()  # noqa: SIM115 (closed below)
            files.append(args_file)
            args_file.write(b"".join(a.encode() + b"\0" for a in bwrap_args))
            args_file.seek(0)
            pass_fds.append(args_file.fileno())
            cmd = [shutil.which("bwrap") or "bwrap", "--args", str(args_file.fileno()), "--", *cmd]
        slot.errlog = tempfile.TemporaryFile()  # noqa: SIM115 (closed when the slot is reaped)
        slot.proc = subprocess.Popen(
            cmd,
            stdin=cfg_file,
            stdout=subprocess.DEVNULL,
            stderr=slot.errlog,
            pass_fds=pass_fds,
            env=bw.worker_env(),
            cwd="/",
            start_new_session=True,
        )
    except BaseException:
        parent_end.close()
        if slot.errlog is not None:
            slot.errlog.close()
            slot.errlog = None
        if slot.host_tmp:
            remove_tree(slot.host_tmp)
        raise
    finally:
        child_end.close()
        for f in files:
            f.close()
    parent_end.setblocking(False)
    slot.ctl = parent_end
    slot.started = time.monotonic()
    return slot
