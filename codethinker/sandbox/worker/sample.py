"""The life of one sample process (forked by the zygote of :mod:`codethinker.sandbox.worker.main`):
lock down, announce, run one job under the timer with captured output, send its result, exit."""

from __future__ import annotations

import builtins
import contextlib
import os
import signal
import sys
import time
from typing import Any, NoReturn

from codethinker.sandbox.lockdown import lock_down
from codethinker.sandbox.worker.capture import ACTIVE, Capped, SandboxTimeout, safe_text, type_name
from codethinker.sandbox.worker.pipes import recv_request, send

__all__ = ["run_sample"]

FALLBACK_OUTPUT_CHARS = 64 * 1024  # stdout/stderr kept in a ResultNotSerializable frame


def _reply(fd: int, result: dict, key: str) -> None:
    """Send the job's result with its key (a frame the sample writes itself lacks the key)."""
    result["key"] = key
    try:
        send(fd, result)
    except (TypeError, ValueError, AttributeError, RecursionError, MemoryError) as exc:  # WireError is a ValueError
        fallback = {k: result[k] for k in ("stdout", "stderr", "duration_s", "key")}
        for k in ("stdout", "stderr"):  # escaped text can take 12 bytes a character: keep the frame small
            fallback[k] = fallback[k][:FALLBACK_OUTPUT_CHARS]
        send(
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


def run_sample(cfg: dict, lane: int, fds: list[int], own: list[int], runners: dict, pristine: dict) -> NoReturn:
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
        send(res_fd, {"ready": True})
        req = recv_request(req_fd)
        if req is not None:
            key = req.pop("key", "")  # only in this frame's locals while user code runs
            _prepare_runner(runners.get(req.get("runner")))
            _reply(res_fd, _run_job(req, runners, pristine), key)
    except BaseException as exc:
        code = 5
        with contextlib.suppress(BaseException):
            os.write(2, f"sample process failed: {type(exc).__name__}: {exc}\n".encode()[:2000])
    os._exit(code)


def _prepare_runner(runner: Any) -> None:
    """Let the job's runner module set up the sample's process after its lock-down and before any
    user code (its optional ``prepare_process()``; the tracer installs its guard there, so a
    sample's module-level code already runs under it)."""
    module = sys.modules.get(getattr(runner, "__module__", "") or "")
    prepare = getattr(module, "prepare_process", None)
    if callable(prepare):
        prepare()
