"""params.yaml as plain data: reading the file, resolving ``{profile: value}`` mappings.

Stages read their section typed, through :func:`codethinker.config.load_config` (built on these);
the plain mappings serve the tools that look at the whole file (preflight, the Prefect flow).

>>> load_section("fetch", path="params.yaml")  # doctest: +SKIP
{'sources': [...], ...}
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from codethinker.errors import CodethinkerError

__all__ = [
    "PROFILES",
    "PROFILE_FALLBACK",
    "ParamsError",
    "answer_paths",
    "by_profile",
    "flatten",
    "load_params",
    "load_section",
    "load_yaml",
    "mirror_root",
    "resolve_params",
]

PROFILES = ("default", "micro-long", "full", "paper")
# a profile missing from a ``{profile: value}`` mapping takes the value of this one: ``paper`` is
# ``full`` plus the overrides that name ``paper`` (``{default: 300, full: 0}`` is 0 for paper); ``micro-long``
# is ``default`` plus its own (longer generated programs, a longer SFT: docs/training.md)
PROFILE_FALLBACK: dict[str, str] = {"paper": "full", "micro-long": "default"}


class ParamsError(CodethinkerError, ValueError):
    """params.yaml is missing, malformed or lacks a section."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's floats: ``5e-05`` (how ``dvc exp run -S x=0.00005`` writes
    a small number back into params.yaml) is a float, not the string YAML 1.1 reads; DVC's own reader
    (ruamel, YAML 1.2) takes it as a float too."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),  # an exponent, dot or none: 5e-05, 1E3
    list("-+0123456789"),
)


def load_yaml(text: str) -> Any:
    r"""``text`` as YAML, the way params.yaml is read (:class:`_Loader`); a key given twice in one mapping
    is a :class:`ParamsError` naming the dotted key and both lines (YAML keeps the last one silently; DVC's
    reader, ruamel, refuses the file too).

    >>> load_yaml("lr: 5e-05\nsteps: 16\nname: 1e3x")
    {'lr': 5e-05, 'steps': 16, 'name': '1e3x'}
    >>> load_yaml("sft:\n  steps: 1\nsft:\n  steps: 2\n")
    Traceback (most recent call last):
    ...
    codethinker.params.ParamsError: sft: duplicated key at lines 1 and 3 (YAML would keep the last one silently)
    """
    loader = _Loader(text)  # a SafeLoader subclass: no arbitrary objects
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_duplicate_keys(node, "", set())
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _refuse_duplicate_keys(node: yaml.Node, where: str, seen: set[int]) -> None:
    """A :class:`ParamsError` for the first mapping key of ``node``'s tree given twice in its mapping."""
    if id(node) in seen:  # an alias: its node is checked once
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        lines: dict[Any, int] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            dotted = f"{where}.{name}" if where else str(name)
            if name is not None and name != "<<":  # a merge key may repeat
                line = key.start_mark.line + 1
                if name in lines:
                    first = lines[name]
                    raise ParamsError(
                        f"{dotted}: duplicated key at lines {first} and {line} (YAML would keep the last one silently)"
                    )
                lines[name] = line
            _refuse_duplicate_keys(value, dotted, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _refuse_duplicate_keys(item, f"{where}[{i}]", seen)


def load_params(path: str | os.PathLike[str] = "params.yaml") -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ParamsError(f"{p}: params file not found (run from the project root)")
    try:
        data = load_yaml(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ParamsError(f"{p}: not valid YAML: {exc}") from None
    except ParamsError as exc:
        raise ParamsError(f"{p}: {exc}") from None
    if not isinstance(data, dict):
        raise ParamsError(f"{p}: top level must be a mapping")
    return data


def load_section(name: str, path: str | os.PathLike[str] = "params.yaml") -> dict[str, Any]:
    """A section as a plain mapping, every ``{profile: value}`` resolved for ``base.profile``
    (:func:`resolve_params`); ``base`` is available as ``section['base']``. Untyped: the project's
    stages use :func:`codethinker.config.load_config`."""
    data = load_params(path)
    if name not in data:
        raise ParamsError(f"{path}: no section '{name}'")
    data = resolve_params(data)
    section = dict(data[name] or {})
    section.setdefault("base", data["base"])
    return section


def mirror_root(base: dict[str, Any]) -> Path | None:
    """The local data mirror: ``$CODETHINKER_MIRROR`` or ``base.mirror``; ``None`` when absent."""
    raw = os.environ.get("CODETHINKER_MIRROR") or base.get("mirror")
    if not raw:
        return None
    p = Path(raw).expanduser()
    return p if p.is_dir() else None


def answer_paths() -> tuple[str, ...]:
    """The host folders that hold tests and their answers, which a judged program's sandbox hides
    (``SandboxConfig.hide``): the checkout (its ``data/``) and the data mirror (``$CODETHINKER_MIRROR``, and
    ``base.mirror`` of the params.yaml in the working directory and in the checkout, each relative to its
    file's folder), those that exist."""
    root = Path(__file__).resolve().parents[1]
    found = [root, Path(os.environ.get("CODETHINKER_MIRROR") or root).expanduser()]
    for params in (Path("params.yaml").resolve(), root / "params.yaml"):
        try:
            raw = (load_params(params).get("base") or {}).get("mirror") if params.is_file() else None
        except (ParamsError, OSError, AttributeError):
            raw = None
        if isinstance(raw, str) and raw:
            found.append(params.parent / Path(raw).expanduser())
    return tuple(dict.fromkeys(str(p.resolve()) for p in found if p.is_dir()))


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


def _profile_chain(profile: str) -> list[str]:
    """``profile`` and the profiles it falls back to, in order (``paper`` -> ``[paper, full]``)."""
    chain = [profile]
    while chain[-1] in PROFILE_FALLBACK and PROFILE_FALLBACK[chain[-1]] not in chain:
        chain.append(PROFILE_FALLBACK[chain[-1]])
    return chain


def by_profile(value: Any, base: dict[str, Any]) -> Any:
    """A parameter that differs by ``base.profile``: ``{default: 300, full: null}`` -> the current one.

    Any other value is returned as it is. A profile the mapping does not name takes the value of
    the profile it falls back to (:data:`PROFILE_FALLBACK`: ``paper`` -> ``full``).

    >>> by_profile({"default": 300, "full": None}, {"profile": "full"}) is None
    True
    >>> by_profile(15, {"profile": "default"})
    15
    >>> by_profile({"default": 1, "full": 2}, {"profile": "paper"})
    2
    """
    if not (isinstance(value, dict) and value and set(value) <= set(PROFILES)):
        return value
    profile = base.get("profile", "default")
    if profile not in PROFILES:
        raise ParamsError(f"base.profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    chain = _profile_chain(profile)
    for name in chain:
        if name in value:
            return value[name]
    also = f" (nor for {', '.join(map(repr, chain[1:]))}, which it falls back to)" if len(chain) > 1 else ""
    raise ParamsError(f"parameter {value!r} has no value for profile {profile!r}{also}")


def resolve_params(data: dict[str, Any], profile: str | None = None) -> dict[str, Any]:
    """The whole params mapping for ``profile`` (default: its ``base.profile``): every
    ``{profile: value}`` mapping, at any depth, replaced by the profile's value; ``base.profile``
    set to the profile. Nothing is written: ``data`` is left as it is.

    >>> resolve_params({"base": {}, "sft": {"steps": {"default": 1, "full": -1}}}, "paper")["sft"]
    {'steps': -1}
    """
    base = dict(data.get("base") or {})
    if profile is not None:
        base["profile"] = profile
    name = base.setdefault("profile", "default")
    if name not in PROFILES:
        raise ParamsError(f"profile must be one of {', '.join(PROFILES)}, got {name!r}")

    def walk(value: Any, where: str) -> Any:
        try:
            value = by_profile(value, base)
        except ParamsError as exc:
            raise ParamsError(f"{where}: {exc}") from None
        if isinstance(value, dict):
            return {k: walk(v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    resolved_base = {**walk(base, "base"), "profile": name}
    out = {"base": resolved_base} if "base" not in data else {}
    out.update({k: resolved_base if k == "base" else walk(v, str(k)) for k, v in data.items()})
    return out
