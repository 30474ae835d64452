"""What a stage run records without any code in the stage: its ``dvc.yaml`` declarations.

From the stage's entry (:func:`codethinker.ops.dvcfile.declared`): the numbers of its ``metrics``
files (a metrics folder: each ``<name>.json`` under it, keys prefixed ``<name>.``), logged once, as
MLflow metrics; its ``plots`` and ``metrics`` files as artifacts; a ``manifest.json`` of its ``outs``
(size, lines, sha256) and out files up to ``$CODETHINKER_TRACKING_MAX_ARTIFACT_MB`` (2) MB under
``outs/``. An out folder holding a PEFT adapter (``adapter_config.json``: sft's and grpo's
``models/*/adapter``) is registered as a new version of model ``codethinker-<stage>``.
``$CODETHINKER_TRACKING_AUTOLOG=off`` turns it off.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from codethinker.ops.dvcfile import declared
from codethinker.tracking import StageRun, clean_key

__all__ = ["autolog", "manifest"]

_MANIFEST_HASH_LIMIT = 256 * 2**20  # hash files up to 256 MiB
_MANIFEST_MAX_FILES = 2000


def _file_info(q: Path) -> dict[str, Any]:
    info: dict[str, Any] = {"bytes": q.stat().st_size}
    if info["bytes"] <= _MANIFEST_HASH_LIMIT:
        h, lines = hashlib.sha256(), 0
        with q.open("rb") as fh:
            for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                h.update(chunk)
                lines += chunk.count(b"\n")
        info["sha256"] = h.hexdigest()
        if q.suffix in (".jsonl", ".csv", ".tsv", ".txt"):
            info["lines"] = lines
    return info


def manifest(paths: list[str], root: Path) -> dict[str, Any]:
    """Each file under ``paths``: bytes, sha256 (up to 256 MiB), lines (text formats); keys relative to root."""
    files: dict[str, Any] = {}
    for raw in paths:
        p = root / raw
        items = sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
        for q in items[:_MANIFEST_MAX_FILES]:
            files[os.path.relpath(q, root)] = _file_info(q) if q.is_file() else {"missing": True}
        if p.is_dir() and len(items) > _MANIFEST_MAX_FILES:
            files[raw] = {"files_not_listed": len(items) - _MANIFEST_MAX_FILES}
    return {"files": files, "total_bytes": sum(v.get("bytes", 0) for v in files.values())}


def _log_metrics(handle: StageRun, paths: list[str]) -> None:
    for m in paths:
        files = sorted(Path(m).rglob("*.json")) if Path(m).is_dir() else [Path(m)]
        for f in files:
            prefix = f"{os.path.relpath(f.with_suffix(''), m)}." if Path(m).is_dir() else ""
            handle.log_metrics_file(f, prefix=prefix)
        handle.log_artifact(m, artifact_path="metrics")


def _register_adapter(handle: StageRun, stage: str, outs: list[str]) -> None:
    for o in outs:  # a PEFT adapter among the outs: a new version of `codethinker-<stage>` in the registry
        q = Path(o)
        if (q / "adapter_config.json").is_file():
            logged = {a.path for a in handle.client.list_artifacts(handle.run_id)} if handle.client else set()
            handle.register_adapter(q, f"codethinker-{clean_key(stage)}", upload=q.name not in logged)
            return


def _log_outs(handle: StageRun, outs: list[str], root: Path) -> None:
    rel = [os.path.relpath(o, root) for o in outs]
    handle.log_dict(manifest(rel, root) | {"outs": rel}, "manifest.json")
    limit = float(os.environ.get("CODETHINKER_TRACKING_MAX_ARTIFACT_MB", "2")) * 2**20
    for o in outs:  # small outs themselves (predictions, reports); big ones only in the manifest
        q = Path(o)
        if q.is_file() and q.stat().st_size <= limit:
            handle.log_artifact(q, artifact_path="outs")
        elif q.is_dir() and sum(f.stat().st_size for f in q.rglob("*") if f.is_file()) <= limit:
            handle.log_artifact(q, artifact_path=f"outs/{q.name}")


def autolog(handle: StageRun, stage: str, root: Path) -> None:
    """Log what ``stage`` declares in ``root/dvc.yaml`` to ``handle`` (see the module doc)."""
    if os.environ.get("CODETHINKER_TRACKING_AUTOLOG", "on").lower() in ("off", "0", "false"):
        return
    decl = declared(stage, root)
    if not decl:
        return
    _log_metrics(handle, decl.get("metrics", []))
    for p in decl.get("plots", []):
        handle.log_artifact(p, artifact_path="plots")
    outs = decl.get("outs", [])
    _register_adapter(handle, stage, outs)
    if outs:
        _log_outs(handle, outs, root)
