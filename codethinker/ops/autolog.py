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
import json
import os
import sys
from pathlib import Path
from typing import Any

from codethinker.ops.dvcfile import declared
from codethinker.ops.headline import git_commit, headline, parent_metrics
from codethinker.ops.views import detail_paths, read_detail
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


MODEL_DESCRIPTION = "models trained by codethinker (the folder, with its model card README.md)"
TRAINED = (
    "sft",
    "grpo",
    "grpo_codegen",
    "reward_model",
)  # the stages whose model folder is registered (bootstrap's is random)


def model_card(stage: str, folder: Path, params: dict[str, str], commit: str | None) -> str:
    """The README.md of a registered model folder: what trained it, with which params, how to load it."""
    cfg = json.loads((folder / "config.json").read_text()) if (folder / "config.json").is_file() else {}
    arch = ", ".join(cfg.get("architectures") or []) or "?"
    layers, width, vocab = (cfg.get(k, "?") for k in ("num_hidden_layers", "hidden_size", "vocab_size"))
    shape = f"{layers} layers x {width}, vocab {vocab}"
    rows = "\n".join(f"| `{k}` | `{v}` |" for k, v in sorted(params.items()))
    return (
        f"# codethinker-{stage}\n\nThe model the `{stage}` stage of codethinker trained ({arch}, {shape}), "
        f"commit `{commit or '?'}`. Load it with `transformers.AutoModel*.from_pretrained(<this folder>)`; the "
        f"held-out scores are in the stage's MLflow run and `metrics/`.\n\n| param | value |\n|---|---|\n{rows}\n"
    )


def _register_model(handle: StageRun, stage: str, outs: list[str]) -> None:
    """A PEFT adapter among the outs, else the trained model folder (``config.json`` + weights) of a
    :data:`TRAINED` stage: a new version of ``codethinker-<stage>`` in the registry, with a model card
    (``README.md`` in the registered copy, not in the DVC out, whose hash stays the trainer's)."""
    name = f"codethinker-{clean_key(stage)}"
    for o in outs:
        q = Path(o)
        if (q / "adapter_config.json").is_file():
            logged = {a.path for a in handle.client.list_artifacts(handle.run_id)} if handle.client else set()
            handle.register_adapter(q, name, upload=q.name not in logged)
            return
    if stage not in TRAINED:
        return
    for o in outs:
        q = Path(o)
        if (q / "config.json").is_file() and any(q.glob("*.safetensors")):
            size = sum(f.stat().st_size for f in q.rglob("*") if f.is_file())
            limit = float(os.environ.get("CODETHINKER_TRACKING_MAX_MODEL_MB", "2048")) * 2**20
            if size > limit:  # a hub-sized full fine-tune: the folder stays a DVC out only
                print(
                    f"codethinker.tracking: {q} ({size / 2**20:.0f} MB) not registered: over "
                    "CODETHINKER_TRACKING_MAX_MODEL_MB",
                    file=sys.stderr,
                )
                return
            # the card goes to the registered copy only: the DVC out stays what the trainer wrote
            handle.log_artifact(q, artifact_path="model")
            handle.log_text(model_card(stage, q, handle.params, git_commit(q)), "model/README.md")
            handle.register_adapter(
                q,
                name,
                artifact_path="model",
                upload=False,
                tags={"codethinker.kind": "model"},
                description=MODEL_DESCRIPTION,
            )
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


def log_headline(parent: StageRun, stage: str, root: Path) -> dict[str, float]:
    """The headline numbers of ``stage``'s detail reports (:func:`codethinker.ops.headline.headline`) on the
    pipeline's parent run, named ``<group>/<key>``, so that runs compare side by side; returns them."""
    numbers = parent_metrics(stage, headline(stage, read_detail(detail_paths(stage, root))))
    if numbers:
        parent.log_metrics(numbers)
    return numbers


def autolog(handle: StageRun, stage: str, root: Path) -> None:
    """Log what ``stage`` declares in ``root/dvc.yaml`` to ``handle`` (see the module doc)."""
    if os.environ.get("CODETHINKER_TRACKING_AUTOLOG", "on").lower() in ("off", "0", "false"):
        return
    decl = declared(stage, root)
    if not decl:
        return
    _log_metrics(handle, [str(p) for p in detail_paths(stage, root)])  # every number; the headline is a subset
    for p in decl.get("plots", []):
        handle.log_artifact(p, artifact_path="plots")
    outs = decl.get("outs", [])
    _register_model(handle, stage, outs)
    if outs:
        _log_outs(handle, outs, root)
