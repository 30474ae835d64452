"""Preflight's checks for ``grpo.backend: verl``: the verl environment's interpreter imports ``verl``,
and with ``grpo.verl.nnodes > 1`` a Ray cluster is reachable from it with enough nodes and GPUs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from codethinker.config.loader import ParamsFile
from codethinker.preflight.checks import GRPO_STAGES, CheckResult, PlannedCheck, trainer_section
from codethinker.preflight.probes import Probes, _last_line

__all__ = ["verl_python"]


def verl_python(env: Mapping[str, str], root: Path) -> str:
    """The verl environment's interpreter, as :func:`codethinker.training.grpo_verl.verl_python`
    finds it (``$VERL_PYTHON``, else ``.venv-verl/bin/python``), relative to ``root``; absolute but
    not resolved (a venv's python is a symlink to the base interpreter, which lacks the venv)."""
    return env.get("VERL_PYTHON") or str((root / ".venv-verl" / "bin" / "python").absolute())


def _plan_verl(params: ParamsFile, root: Path) -> list[PlannedCheck]:
    grpo = trainer_section(params, "grpo")
    backend = grpo.params.backend if grpo is not None else "local"
    if grpo is None or backend != "verl":
        reason = f"not needed: grpo.backend is {backend}"
        return [
            PlannedCheck("verl environment", frozenset(), None, reason),
            PlannedCheck("Ray cluster", frozenset(), None, reason),
        ]
    nnodes, per_node = grpo.params.verl.nnodes, grpo.params.verl.gpus_per_node

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

    checks = [PlannedCheck("verl environment", GRPO_STAGES, env_probe)]
    if nnodes <= 1:
        checks.append(
            PlannedCheck(
                "Ray cluster", frozenset(), None, "not needed: grpo.verl.nnodes is 1 (verl starts its own Ray)"
            )
        )
        return checks

    def ray_probe(p: Probes) -> CheckResult:
        return _check_ray(p, verl_python(p.env, root), nnodes, per_node)

    checks.append(PlannedCheck("Ray cluster", GRPO_STAGES, ray_probe))
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
