"""The flow's view of ``dvc.yaml``: stage order, targets, stage classes, ``-S`` overrides.

The DAG is read through DVC on every run (:func:`codethinker.ops.dvc_api.read_graph`, never
hard-coded): a stage added to ``dvc.yaml`` becomes a task. What a stage needs is declared on the
stage, in its ``meta:`` entry of ``dvc.yaml``, not guessed from parameter names:

    sft:
      meta: {gpu: true}                 # holds the GPU slot, gets retries
    gen_inputs:
      meta: {llm: gen_inputs.backend}   # calls an LLM endpoint when this parameter is `llm`

Optional ``flow:`` section of params.yaml (defaults shown)::

    flow:
      gpu_stages: null        # a list replaces the stages' `meta: {gpu: true}` marks
      llm_uses_gpu: true      # LLM stages also take the GPU slot
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from codethinker.ops.dvc_api import StageSpec, apply_params_overrides, read_graph
from codethinker.ops.dvcfile import llm_params
from codethinker.params import by_profile

__all__ = ["StageSpec", "apply_overrides", "classify", "normalize_overrides", "read_dag", "select", "uses_llm"]


def read_dag(root: str | os.PathLike[str] = ".") -> list[StageSpec]:
    """The pipeline stages in an order that respects dependencies (ties: dvc.yaml order)."""
    return read_graph(root)


def select(specs: list[StageSpec], targets: list[str] | None) -> list[StageSpec]:
    """``targets`` and everything upstream of them (``dvc repro TARGET`` semantics); all when empty."""
    if not targets:
        return specs
    by_name = {s.name: s for s in specs}
    unknown = [t for t in targets if t not in by_name]
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; dvc.yaml has {list(by_name)}")
    keep: set[str] = set()
    todo = list(targets)
    while todo:
        name = todo.pop()
        if name not in keep:
            keep.add(name)
            todo.extend(by_name[name].upstream)
    return [s for s in specs if s.name in keep]


def _param(params: dict[str, Any], dotted: str) -> Any:
    node: Any = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def uses_llm(spec: StageSpec, params: dict[str, Any]) -> bool:
    """Whether one of the stage's ``meta: {llm: ...}`` parameters is ``llm`` for ``base.profile``."""
    base = params.get("base") or {}
    for dotted in llm_params(spec.meta):
        value = _param(params, dotted)
        try:
            value = by_profile(value, base)
        except ValueError:
            continue
        if str(value).strip().lower() == "llm":
            return True
    return False


def classify(specs: list[StageSpec], params: dict[str, Any]) -> dict[str, dict[str, bool]]:
    """For each stage: ``gpu`` (takes the GPU slot), ``llm`` (calls an LLM), ``retry`` (gets retries).

    GPU stages: those marked ``meta: {gpu: true}`` in dvc.yaml, or the sections listed in
    ``flow.gpu_stages`` when params.yaml sets it. LLM stages: see :func:`uses_llm`; they take the
    GPU slot too unless ``flow.llm_uses_gpu: false``.
    """
    cfg = params.get("flow") or {}
    gpu_names = cfg.get("gpu_stages")
    llm_gpu = bool(cfg.get("llm_uses_gpu", True))
    out = {}
    for s in specs:
        llm = uses_llm(s, params)
        marked = s.section in set(gpu_names) if gpu_names is not None else bool(s.meta.get("gpu"))
        gpu = marked or (llm and llm_gpu)
        out[s.name] = {"gpu": gpu, "llm": llm, "retry": gpu or llm}
    return out


def _hydra_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ",".join(_hydra_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_hydra_value(x)}" for k, x in v.items()) + "}"
    s = str(v)
    return s if re.fullmatch(r"[\w./\-]+", s) else json.dumps(s)


def normalize_overrides(overrides: list[str] | dict[str, Any] | None) -> list[str]:
    """``{'a.b': 1}`` or ``['a.b=1']`` -> ``['a.b=1']`` (the ``dvc exp run -S`` form)."""
    if not overrides:
        return []
    if isinstance(overrides, dict):
        return [f"{k}={_hydra_value(v)}" for k, v in overrides.items()]
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ValueError(f"overrides must look like section.key=value, got {bad}")
    return list(overrides)


def apply_overrides(root: str | os.PathLike[str], overrides: list[str] | dict[str, Any] | None) -> list[str]:
    """Write ``overrides`` into ``root/params.yaml`` as ``dvc exp run -S`` does; return them as strings.

    A key that does not exist is an error (prefix it with ``+`` to add one: ``+sft.new_key=1``).
    """
    items = normalize_overrides(overrides)
    if items:
        apply_params_overrides(Path(root) / "params.yaml", items)
    return items
