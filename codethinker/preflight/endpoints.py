"""Preflight's check of the LLM endpoints (``gen_inputs.llm`` when ``gen_inputs.backend`` is ``llm``,
``contra_sft.llm`` when ``contra_sft.teacher`` is ``llm``): ``GET <base_url>/models`` answers within a
few seconds and lists the model."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from codethinker.data.llm import ChatConfig
from codethinker.preflight.checks import CheckResult, PlannedCheck, _section
from codethinker.preflight.probes import Probes


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
