"""params.yaml access: one section per stage plus ``base`` (seed, mirror, tracking).

>>> load_section("fetch", path="params.yaml")  # doctest: +SKIP
{'sources': [...], ...}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

__all__ = ["PROFILES", "ParamsError", "by_profile", "flatten", "load_params", "load_section", "mirror_root"]

PROFILES = ("default", "full")


class ParamsError(ValueError):
    """params.yaml is missing, malformed or lacks a section."""


def load_params(path: str | os.PathLike[str] = "params.yaml") -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ParamsError(f"{p}: params file not found (run from the project root)")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ParamsError(f"{p}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ParamsError(f"{p}: top level must be a mapping")
    return data


def load_section(name: str, path: str | os.PathLike[str] = "params.yaml") -> dict[str, Any]:
    """The stage's section merged over nothing else; ``base`` is available as ``section['base']``."""
    data = load_params(path)
    if name not in data:
        raise ParamsError(f"{path}: no section '{name}'")
    section = dict(data[name] or {})
    section.setdefault("base", data.get("base", {}))
    return section


def mirror_root(base: dict[str, Any]) -> Path | None:
    """The local data mirror: ``$CODETHINKER_MIRROR`` or ``base.mirror``; ``None`` when absent."""
    raw = os.environ.get("CODETHINKER_MIRROR") or base.get("mirror")
    if not raw:
        return None
    p = Path(raw).expanduser()
    return p if p.is_dir() else None


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{'a': {'b': 1}}`` -> ``{'a.b': 1}`` (for MLflow params)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def by_profile(value: Any, base: dict[str, Any]) -> Any:
    """A parameter that differs by ``base.profile``: ``{default: 300, full: null}`` -> the current one.

    Any other value is returned as it is.

    >>> by_profile({"default": 300, "full": None}, {"profile": "full"}) is None
    True
    >>> by_profile(15, {"profile": "default"})
    15
    """
    if not (isinstance(value, dict) and value and set(value) <= set(PROFILES)):
        return value
    profile = base.get("profile", "default")
    if profile not in PROFILES:
        raise ParamsError(f"base.profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    if profile not in value:
        raise ParamsError(f"parameter {value!r} has no value for profile {profile!r}")
    return value[profile]


def trace_thoughts(base: dict[str, Any], path: str | os.PathLike[str] = "params.yaml") -> bool:
    """Whether the policy's SFT traces carry thoughts (``contra_sft.teacher`` is not ``none``):
    the stages that size a response budget from the truths read it."""
    teacher = load_params(path).get("contra_sft", {}).get("teacher", "template")
    return by_profile(teacher, base) != "none"
