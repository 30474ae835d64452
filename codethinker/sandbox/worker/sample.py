"""The life of one sample process (forked by the zygote of :mod:`codethinker.sandbox.worker.main`):
lock down, announce, run one job under the timer with captured output, send its result, exit.

What the worker does after the sample's code has started (classify the outcome, restore the
interpreter, encode and write the result frame with the job's key) uses nothing the sample can
replace: the reply (:func:`_make_reply`, holding the key and a private encoder and writer) and the
restore function are closures made before the sample's code runs and kept only in the worker's own
frames; the other functions read their helpers from defaults bound at import (a tuple cannot be
changed in place, and assigning ``__defaults__`` is refused in a trace job's process), never from a
module global or builtin looked up at call time.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import signal
import sys
import time
import types
from collections.abc import Callable
from typing import Any, NoReturn

from codethinker.sandbox.lockdown import lock_down
from codethinker.sandbox.worker.capture import ACTIVE, Capped, SandboxTimeout, safe_text, type_name
from codethinker.sandbox.worker.pipes import make_sender, recv_request, send

__all__ = ["run_sample"]

FALLBACK_OUTPUT_CHARS = 64 * 1024  # stdout/stderr kept in a ResultNotSerializable frame

_BUILTINS = dict(vars(builtins))  # as the zygote imported them: the sample may replace any


def _make_reply(fd: int, key: str) -> Callable[[dict], None]:
    """``reply(result)``: send the job's result with its key (a frame the sample writes itself lacks
    the key); a result that cannot be encoded becomes a ``ResultNotSerializable`` error frame."""
    send_frame, safe, keep = make_sender(fd), safe_text, FALLBACK_OUTPUT_CHARS
    catch = (TypeError, ValueError, AttributeError, RecursionError, MemoryError)  # WireError is a ValueError

    def reply(result: dict) -> None:
        result["key"] = key
        try:
            send_frame(result)
        except catch as exc:
            fallback = {k: result[k] for k in ("stdout", "stderr", "duration_s", "key")}
            for k in ("stdout", "stderr"):  # escaped text can take 12 bytes a character: keep the frame small
                fallback[k] = fallback[k][:keep]
            error = {"status": "error", "error_type": "ResultNotSerializable", "error_message": safe(exc)}
            send_frame({**error, **fallback})

    return reply


def _make_restore() -> Callable[[], None]:
    """``restore()``: undo what a sample may have done to the interpreter that would break the report
    of its own result (replaced builtins such as ``len``, trace hooks). Nothing of it outlives the
    process anyway."""
    settrace, setprofile, gettrace, getprofile = sys.settrace, sys.setprofile, sys.gettrace, sys.getprofile
    bd, saved, base_exception = vars(builtins), dict(_BUILTINS), BaseException

    def restore() -> None:
        try:  # in a trace job's process the tracer's guard refuses these to the sample, and has reset them
            if gettrace() is not None:
                settrace(None)
            if getprofile() is not None:
                setprofile(None)
        except base_exception:
            pass
        bd.clear()
        bd.update(saved)

    return restore


# --------------------------------------------------------------------------- one sample
def _entry_problem(
    code: types.CodeType,
    fn: Any,
    g: dict,
    entry: str,
    _type: type = type,
    _function: type = types.FunctionType,
    _code: type = types.CodeType,
) -> str | None:
    """Why ``fn`` is not the function the source's last top-level ``def entry`` made (a decorator's
    or a later assignment's replacement, another code object, other globals), or None."""
    if _type(fn) is not _function:
        return f"{entry!r} is not a plain function (a decorator or an assignment replaced the def)"
    made = [c for c in code.co_consts if _type(c) is _code and c.co_name == entry]
    if not made or fn.__code__ is not made[-1] or fn.__globals__ is not g:
        return f"{entry!r} is not the function its def in the given source made"
    return None


def _execute(
    req: dict,
    runner: Any,
    pristine: dict,
    _compile: Callable[..., Any] = compile,
    _exec: Callable[..., Any] = exec,
    _dict: type = dict,
    _callable: Callable[..., bool] = callable,
    _str: type = str,
    _entry_problem: Callable[..., str | None] = _entry_problem,
) -> tuple[str, Any, str | None, str | None]:
    """Compile and run the source into fresh globals, then the runner on the entry function."""
    code = _compile(req["source"], "<sample>", "exec", dont_inherit=True)
    g: dict[str, Any] = {"__builtins__": _dict(pristine), "__name__": "__sandbox__"}
    _exec(code, g)
    fn = g.get(req["entry"])
    if fn is None:
        return "error", None, "EntryNotFound", f"no function {req['entry']!r} defined"
    if not _callable(runner):
        return "error", None, "RunnerUnavailable", _str(runner or req["runner"])
    if req.get("entry_def"):
        problem = _entry_problem(code, fn, g, req["entry"])
        if problem is not None:
            return "error", None, "EntryReplaced", problem
    return "ok", runner(fn, req["args"], req["kwargs"], req["options"]), None, None


_TOOLS = (
    signal.setitimer,
    signal.ITIMER_REAL,
    time.perf_counter,
    ACTIVE,
    SandboxTimeout,
    MemoryError,
    BaseException,
    safe_text,
    type_name,
)


def _run_job(
    req: dict,
    runner: Any,
    pristine: dict,
    restore: Callable[[], None],
    _tools: tuple = _TOOLS,
    _execute: Callable[..., Any] = _execute,
) -> dict[str, Any]:
    """Run one job under the timer with captured output; the result frame as a dict."""
    setitimer, itimer_real, perf_counter, active, timeout_exc, memory_error, base_exc, safe, name_of = _tools
    out, err = Capped(req["output_limit"]), Capped(req["output_limit"])
    out_text, err_text = out.getvalue, err.getvalue
    sys.stdout, sys.stderr = out, err
    limit = req["timeout"]
    timed_out = ("timeout", None, "Timeout", f"exceeded {limit} s")
    t0 = perf_counter()
    try:
        setitimer(itimer_real, limit, 0.05)
        active[0] = True
        try:
            status, value, etype, emsg = _execute(req, runner, pristine)
            active[0] = False
        except timeout_exc:
            active[0] = False
            status, value, etype, emsg = timed_out
        except memory_error as exc:
            active[0] = False
            status, value, etype, emsg = "memory", None, "MemoryError", safe(exc)
        except base_exc as exc:  # user errors, SystemExit, KeyboardInterrupt ...
            active[0] = False
            status, value, etype, emsg = "error", None, name_of(exc), safe(exc)
    except timeout_exc:  # fired between the user code and the flag reset
        status, value, etype, emsg = timed_out
    finally:
        active[0] = False
        setitimer(itimer_real, 0)
    duration = perf_counter() - t0
    restore()
    if status != "timeout" and duration > limit:  # the sample swallowed the timer's exception
        status, value, etype, emsg = timed_out
    return {
        "status": status,
        "value": value,
        "error_type": etype,
        "error_message": emsg,
        "stdout": out_text(),
        "stderr": err_text(),
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
            # the key lives only in the reply's closure, which lives only in this frame
            reply = _make_reply(res_fd, req.pop("key", ""))
            restore = _make_restore()
            runner = runners.get(req.get("runner"))
            _prepare_runner(runner)
            reply(_run_job(req, runner, pristine, restore))
    except BaseException as exc:
        code = 5
        with contextlib.suppress(BaseException):
            os.write(2, f"sample process failed: {type(exc).__name__}: {exc}\n".encode()[:2000])
    os._exit(code)


def _prepare_runner(runner: Any) -> None:
    """Let the job's runner module set up the sample's process after its lock-down and before any
    user code (its optional ``prepare_process()``; the tracer installs and arms its guard there, so a
    sample's module-level code already runs under it)."""
    module = sys.modules.get(getattr(runner, "__module__", "") or "")
    prepare = getattr(module, "prepare_process", None)
    if callable(prepare):
        prepare()
