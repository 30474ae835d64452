"""The parent's side of the conversation with the zygotes and sample processes of a
:class:`~codethinker.sandbox.Sandbox` (not public API): asking a zygote for sample processes,
its control messages, the result frames of the samples, and ending a process, a job or a
zygote. The event loop that drives it and the public API are in :mod:`codethinker.sandbox.pool`.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import selectors
import socket
import time
from typing import Any

from codethinker.sandbox.config import MAX_START_FAILURES, SandboxConfig
from codethinker.sandbox.jobs import MAX_RESULT_BYTES, SandboxResult, loads_plain, opt_str, result_from_frame
from codethinker.sandbox.slot import Child, Helper, Slot, kill_zygote, reap_zygote, split_frames, stop_and_reap
from codethinker.sandbox.worker.main import LANES

__all__ = ["Dispatcher"]

log = logging.getLogger("codethinker.sandbox")


class Dispatcher:
    """The zygotes (``Slot``) and sample processes (``Child``) of a sandbox and their messages;
    the base of :class:`~codethinker.sandbox.pool.Sandbox`, which runs the event loop."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self._slots: list[Slot] = []  # live or starting zygotes
        self._start_failures = 0
        self._helper_ref: list[Helper] = []  # shared with the finalizer
        self._sel: selectors.BaseSelector | None = None
        self._done: Any = None  # the current map's completion callback
        self._warned_seccomp = False
        self.stats: collections.Counter = collections.Counter()

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
            log.warning("sandbox: no seccomp filter for samples (%s)", opt_str(info.get("seccomp"), 100))
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
                msg = loads_plain(data)
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
                self._end(slot, child, result_from_frame(msg, self.config.output_limit))
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
