"""The probes: the only way preflight's checks reach the network, GPUs, processes and the Hugging
Face cache (:class:`Probes`), so a test can hand in its own (a local HTTP server, a fake interpreter)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["GPUInfo", "ProbeError", "Probes"]


class ProbeError(RuntimeError):
    """A probe could not find out (no torch, no CUDA, a child process that failed)."""


@dataclass(frozen=True)
class GPUInfo:
    index: int
    name: str
    free_bytes: int
    total_bytes: int


def _http(method: str, url: str, timeout_s: float, headers: Mapping[str, str]) -> tuple[int, bytes]:
    """``(status, body)``; an HTTP error status is an answer, not an exception. ``OSError``
    (``URLError``, ``TimeoutError``, refused) when nothing answers."""
    req = urllib.request.Request(url, method=method, headers=dict(headers))
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status, (resp.read(1 << 20) if method != "HEAD" else b"")
    except urllib.error.HTTPError as exc:
        code = exc.code
        with contextlib.suppress(Exception):
            exc.close()
        return code, b""


def _run(cmd: Sequence[str], timeout_s: float) -> tuple[int, str]:
    """``(exit code, stdout + stderr)`` of ``cmd``; ``OSError`` when it cannot start, exit code 124
    when it ran past ``timeout_s``."""
    try:
        res = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, errors="replace"
        )
    except subprocess.TimeoutExpired:
        return 124, f"no answer within {timeout_s:g} s"
    return res.returncode, (res.stdout or "") + (res.stderr or "")


_GPU_SCRIPT = """\
import json
import torch
if not torch.cuda.is_available():
    build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    print(json.dumps({"error": f"torch {torch.__version__} ({build}) sees no CUDA device"}))
else:
    out = []
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
        out.append({"index": i, "name": torch.cuda.get_device_name(i), "free_bytes": free, "total_bytes": total})
    print(json.dumps({"gpus": out}))
"""


def _torch_gpus(run: Callable[[Sequence[str], float], tuple[int, str]]) -> list[GPUInfo]:
    """The CUDA devices torch sees (``CUDA_VISIBLE_DEVICES`` applies), counted in a child process."""
    try:
        rc, out = run([sys.executable, "-c", _GPU_SCRIPT], 180.0)
    except OSError as exc:
        raise ProbeError(f"cannot start {sys.executable}: {exc}") from None
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if rc != 0 or not lines:
        raise ProbeError(f"asking torch for GPUs failed (exit {rc}): {_last_line(out)}")
    data = json.loads(lines[-1])
    if "error" in data:
        raise ProbeError(str(data["error"]))
    return [GPUInfo(**g) for g in data["gpus"]]


def _hf_cached(repo_id: str, filename: str, cache_dir: str | None) -> str | None:
    """The cached file's path when the Hugging Face cache holds ``repo_id``'s ``filename`` (offline)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir)
    except ValueError:  # HFValidationError: not a valid repo id
        return None
    return found if isinstance(found, str) else None


@dataclass
class Probes:
    """What the checks may touch; :meth:`real` for the machine this runs on.

    ``http(method, url, timeout_s, headers) -> (status, body)`` raises ``OSError`` when nothing
    answers; ``run(cmd, timeout_s) -> (exit code, output)`` raises ``OSError`` when ``cmd`` cannot
    start; ``gpus()`` raises :class:`ProbeError` when it cannot tell; ``hf_cached(repo, file)`` is a
    path or None; ``module_found(name)`` whether the main environment has a module.
    """

    http: Callable[[str, str, float, Mapping[str, str]], tuple[int, bytes]] = _http
    run: Callable[[Sequence[str], float], tuple[int, str]] = _run
    gpus: Callable[[], list[GPUInfo]] | None = None
    hf_cached: Callable[[str, str], str | None] | None = None
    module_found: Callable[[str], bool] = lambda name: importlib.util.find_spec(name) is not None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout_s: float = 3.0  # network checks
    process_timeout_s: float = 120.0  # `import verl`, Ray

    def __post_init__(self) -> None:
        if self.gpus is None:
            self.gpus = lambda: _torch_gpus(self.run)
        if self.hf_cached is None:
            cache = self.env.get("HF_HUB_CACHE") or (
                str(Path(self.env["HF_HOME"]) / "hub") if self.env.get("HF_HOME") else None
            )
            self.hf_cached = lambda repo, name: _hf_cached(repo, name, cache)

    @classmethod
    def real(cls) -> Probes:
        return cls()

    def list_gpus(self) -> list[GPUInfo]:
        assert self.gpus is not None
        return self.gpus()

    def cached(self, repo_id: str, filename: str = "config.json") -> str | None:
        assert self.hf_cached is not None
        return self.hf_cached(repo_id, filename)

    def offline(self) -> bool:
        return str(self.env.get("HF_HUB_OFFLINE", "0")).strip().lower() in ("1", "true", "yes", "on")

    def hub_endpoint(self) -> str:
        return str(self.env.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
