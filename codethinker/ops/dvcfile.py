"""``dvc.yaml`` read as plain YAML (no DVC import: a stage reads its own entry in milliseconds).

A stage is addressed as DVC does: ``name``, ``name@key`` (one item of a ``foreach`` stage, whose
``do:`` entry has ``${key}`` replaced) or ``sub/dvc.yaml:name``. Paths come back joined to the
stage's ``wdir``; a path still holding an interpolation (``${item.dep}``) is left out.

:func:`stage_argv` gives the arguments of a stage's ``cmd`` (``python -m stages.<name> --out data/x ...``):
a stage's files are its ``cmd`` arguments (:func:`codethinker.ops.stage.stage_args`), so a caller that runs
the stage's code itself (a test, a script) passes what ``dvc repro`` passes.

``meta:`` marks of a stage (DVC stores ``meta`` and ignores it) tell the flow what a stage needs:
``gpu: true`` (it takes the GPU slot) and ``llm: <section.key>`` or a list of them (it calls an LLM
endpoint when that parameter is ``llm`` for the current ``base.profile``).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

__all__ = ["declared", "llm_params", "marks", "pipeline_outs", "read", "stage_argv", "stage_entry"]

_KINDS = ("outs", "metrics", "plots")


def _split(stage: str, root: Path) -> tuple[Path, str, str]:
    """(dvc.yaml path, stage name, foreach key) of a DVC stage address."""
    file, sep, name = stage.rpartition(":")
    path = root / file if sep and file.endswith(("dvc.yaml", "dvc.yml")) else root / "dvc.yaml"
    if not (sep and file.endswith(("dvc.yaml", "dvc.yml"))):
        name = stage
    name, _, key = name.partition("@")
    return path, name, key


def read(path: str | Path = "dvc.yaml") -> dict[str, Any]:
    """The whole ``dvc.yaml`` at ``path`` (a folder: its ``dvc.yaml``) as plain data; {} when it is absent,
    unreadable or no mapping (every reader of dvc.yaml in the project comes through here)."""
    path = Path(path)
    path = path / "dvc.yaml" if path.is_dir() else path
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def stage_entry(stage: str, root: str | Path = ".") -> dict[str, Any]:
    """The ``dvc.yaml`` entry of ``stage`` (a foreach item's ``do:``, ``${key}`` not yet replaced); {} if none."""
    path, name, key = _split(stage, Path(root))
    stages = read(path).get("stages")
    entry = stages.get(name) if isinstance(stages, dict) else None
    if not isinstance(entry, dict):
        return {}
    if key and isinstance(entry.get("do"), dict):  # foreach stage: `${key}` is the part after @
        entry = entry["do"]
    return entry


def declared(stage: str, root: str | Path = ".", kinds: tuple[str, ...] = _KINDS) -> dict[str, list[str]]:
    """``outs``/``metrics``/``plots`` paths of ``stage`` (or those of ``kinds``: ``("deps",)``; {} when
    dvc.yaml has no such stage)."""
    root = Path(root)
    entry = stage_entry(stage, root)
    if not entry:
        return {}
    path, _, key = _split(stage, root)
    wdir = path.parent / str(entry.get("wdir", "."))
    out: dict[str, list[str]] = {}
    for kind in kinds:
        paths = []
        for item in entry.get(kind) or []:
            raw = next(iter(item)) if isinstance(item, dict) else item
            if isinstance(raw, str):
                raw = raw.replace("${key}", key) if key else raw
                if "${" not in raw:
                    paths.append(str(wdir / raw))
        out[kind] = paths
    return out


def pipeline_outs(root: str | Path = ".") -> list[str]:
    """Every ``outs`` path ``root/dvc.yaml`` declares, relative to ``root`` as written (a foreach stage's
    templated paths left out), and the folder each sits in below a top folder (``models/sft`` of
    ``models/sft/merged``: a LoRA adapter lands beside it): what the pipeline itself will write.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> _ = (d / "dvc.yaml").write_text("stages: {sft: {outs: [models/sft/merged, {metrics/sft.json: {}}]}}")
    >>> pipeline_outs(d)
    ['models/sft/merged', 'models/sft', 'metrics/sft.json']
    """
    stages = read(root).get("stages")
    made: dict[str, None] = {}
    for entry in stages.values() if isinstance(stages, dict) else ():
        body = (entry.get("do") or entry) if isinstance(entry, dict) else {}
        for item in body.get("outs") or [] if isinstance(body, dict) else []:
            out = next(iter(item)) if isinstance(item, dict) and item else item
            if isinstance(out, str) and "${" not in out:
                made[out] = None
                if len(Path(out).parts) > 2:
                    made[str(Path(out).parent)] = None
    return list(made)


def stage_argv(stage: str, root: str | Path = ".") -> list[str]:
    """The arguments of ``stage``'s ``cmd`` after ``python -m stages.<name>`` (a foreach item's ``${key}``
    replaced), as ``main(argv)`` of the stage module takes them; ``ValueError`` when dvc.yaml has no
    such stage or its ``cmd`` is no ``python -m <module> ...``."""
    cmd = stage_entry(stage, root).get("cmd")
    words = shlex.split(cmd) if isinstance(cmd, str) else []
    if len(words) < 3 or words[1] != "-m":
        raise ValueError(f"dvc.yaml: stage {stage!r}: no `python -m <module> ...` cmd (got {cmd!r})")
    _, _, key = _split(stage, Path(root))
    return [w.replace("${key}", key) if key else w for w in words[3:]]


def marks(stage: str, root: str | Path = ".") -> dict[str, Any]:
    """The ``meta:`` mapping of ``stage`` ({} when it has none)."""
    meta = stage_entry(stage, root).get("meta")
    return dict(meta) if isinstance(meta, dict) else {}


def llm_params(meta: dict[str, Any]) -> tuple[str, ...]:
    """The ``section.key`` parameters of a ``meta: {llm: ...}`` mark (one name or a list)."""
    value = meta.get("llm")
    if not value:
        return ()
    return (str(value),) if isinstance(value, str) else tuple(str(v) for v in value)
