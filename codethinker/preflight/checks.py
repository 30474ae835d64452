"""What every preflight check shares: its result (:class:`CheckResult`), the plan entry that runs it or
says why not (:class:`PlannedCheck`), and the helpers that read the typed params and model references.

The checks read params.yaml as the stages do: each section through its config class
(:meth:`codethinker.config.ParamsFile.section`, defaults and derived values included), the policy
through :attr:`~codethinker.config.ParamsFile.policy`. A section params.yaml lacks is a stage the
project does not run: :func:`section` gives None. The training sections' classes import the
trainers (torch, transformers): :func:`trainer_section` imports one only when params.yaml has its
section, so a project without them (the flow's toy pipelines) plans its checks without torch."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from codethinker.config.loader import ModelConfig, ParamsFile
from codethinker.ops.dvcfile import pipeline_outs
from codethinker.preflight.probes import Probes

__all__ = ["GRPO_STAGES", "CheckResult", "PlannedCheck", "is_hub_id", "policy", "section", "trainer_section"]

T = TypeVar("T")
# the training sections' config classes (module, class), imported by trainer_section when needed
TRAINER_SECTIONS: dict[str, tuple[str, str]] = {
    "bootstrap": ("codethinker.config.bootstrap", "BootstrapConfig"),
    "sft": ("codethinker.config.sft", "SFTConfig"),
    "grpo": ("codethinker.config.grpo", "GRPOConfig"),
    "train_eval": ("codethinker.config.grpo", "TrainEvalConfig"),
}

Status = Literal["pass", "fail", "warn", "skip"]
GRPO_STAGES = frozenset({"grpo", "grpo_codegen"})  # the GRPO stages (grpo_codegen takes grpo's settings)


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


def section(params: ParamsFile, cls: type[T]) -> T | None:
    """Section ``cls.SECTION`` of ``params`` as ``cls``; None when params.yaml has no such section."""
    return params.section(cls) if cls.SECTION in params.data else None  # type: ignore[attr-defined]


def trainer_section(params: ParamsFile, name: str) -> Any:
    """Training section ``name`` (:data:`TRAINER_SECTIONS`) typed; None when params.yaml has none
    (then its class is not imported)."""
    if name not in params.data:
        return None
    module, cls = TRAINER_SECTIONS[name]
    return params.section(getattr(importlib.import_module(module), cls))


def policy(params: ParamsFile) -> str:
    """The policy the training starts from: ``sft.model``, which is ``model.base`` when not set
    (:attr:`ParamsFile.policy`); "" when params.yaml names neither (no ``model`` section, and
    ``sft.model`` unset or the fallback :data:`~codethinker.config.POLICY`)."""
    model = section(params, ModelConfig)
    named = model.base if model is not None else None
    sft = trainer_section(params, "sft")
    trained = sft.model if sft is not None else None
    if trained and (named or trained != params.policy):
        return str(trained)
    return named or ""


def _made_by_stages(root: Path) -> list[str]:
    """What the pipeline writes (so a missing model folder there is no error before it ran): the outs of
    ``root/dvc.yaml`` (:func:`codethinker.ops.dvcfile.pipeline_outs`, the project's one reader of it)."""
    return pipeline_outs(root)


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
