"""What every preflight check shares: its result (:class:`CheckResult`), the plan entry that runs it or
says why not (:class:`PlannedCheck`), and the helpers that read resolved params and model references."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from codethinker.preflight.probes import Probes

__all__ = ["CheckResult", "PlannedCheck", "is_hub_id"]

Status = Literal["pass", "fail", "warn", "skip"]


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
