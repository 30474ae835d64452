"""Preflight's check of the LLM endpoints (``gen_inputs.llm`` when ``gen_inputs.backend`` is ``llm``,
``contra_sft.llm`` when ``contra_sft.teacher`` is ``llm``): ``GET <base_url>/models`` answers within a
few seconds and lists the model."""

from __future__ import annotations

import json

from codethinker.config.data import ContraSFTConfig, GenInputsConfig
from codethinker.config.loader import ParamsFile
from codethinker.data.llm import ChatConfig
from codethinker.preflight.checks import CheckResult, PlannedCheck, section
from codethinker.preflight.probes import Probes


def _plan_endpoints(params: ParamsFile) -> list[PlannedCheck]:
    uses: dict[tuple[str, str], list[tuple[str, str, ChatConfig]]] = {}
    why_not = []
    for cls, key in ((GenInputsConfig, "backend"), (ContraSFTConfig, "teacher")):
        cfg = section(params, cls)
        if cfg is None:
            continue
        stage, value = cls.SECTION, getattr(cfg, key)
        if value != "llm":
            why_not.append(f"{stage}.{key} is {value}")
            continue
        target = (cfg.llm.base_url.rstrip("/"), cfg.llm.model)
        uses.setdefault(target, []).append((stage, f"{stage}.llm", cfg.llm))
    if not uses:
        reason = "not needed: " + ", ".join(why_not) if why_not else "not needed: no stage calls an LLM"
        return [PlannedCheck("LLM endpoint", frozenset(), None, reason)]
    checks = []
    for (url, model), users in uses.items():
        stage_set = frozenset(u[0] for u in users)
        where = ", ".join(u[1] for u in users)
        key_env = users[0][2].api_key_env

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
