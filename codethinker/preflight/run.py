"""Running preflight: the plan of checks for resolved params (:func:`plan_checks`, one ``_plan_*`` per
kind of check) and its run into a :class:`PreflightReport` (:func:`run_preflight`)."""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from codethinker.config.loader import ParamsFile
from codethinker.preflight.checks import CheckResult, PlannedCheck
from codethinker.preflight.data_files import _plan_data
from codethinker.preflight.endpoints import _plan_endpoints
from codethinker.preflight.gpus import _plan_gpus
from codethinker.preflight.models import _plan_models
from codethinker.preflight.probes import Probes
from codethinker.preflight.verl_env import _plan_verl

__all__ = ["PreflightReport", "plan_checks", "run_preflight"]


def _selected(stages: frozenset[str], wanted: Collection[str] | None) -> bool:
    return wanted is None or bool(stages & set(wanted))


def plan_checks(params: ParamsFile, root: Path, stages: Collection[str] | None = None) -> list[PlannedCheck]:
    """The checks for ``params`` (params.yaml resolved for a profile, :meth:`ParamsFile.read`) of the
    project at ``root``; ``stages``: only what these params sections (stage names) need (None: all)."""
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
    params = ParamsFile.read(path, profile)
    checks = plan_checks(params, path.resolve().parent, stages)
    probes = probes or Probes.real()
    return PreflightReport(params.base.profile, str(path), tuple(c.run(probes) for c in checks))
