"""The one rule of defaults (codethinker/config/loader.py, docs/architecture.md): a field's code
default is the value of the ``full`` profile, so params.yaml's ``full`` value of every key it gives
equals the default the dataclass has when a user builds it directly; only ``default`` and ``paper``
values differ, and they live in params.yaml alone.

Keys a section's ``derive`` fills from another section when null (``sft.model``: ``model.base``,
``grpo.seed``: ``base.seed``) have no default of their own, and ``base`` names the profile and this
checkout's folders: neither is compared. A mismatch names the dotted key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from codethinker.config.check import section_classes
from codethinker.config.loader import ParamsFile, Section
from codethinker.config.typed import _fields, _hints, _keys
from codethinker.params import PROFILES, load_params

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
NOT_COMPARED = {"base"}  # the profile itself and this checkout's mirror folders (None: download)


def same(a: Any, b: Any) -> bool:
    """Equal values (3 == 3.0), a bool never equal to a number, containers item by item."""
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _walk(cls: type, raw: dict[str, Any], loaded: Any, default: Any, where: str) -> Iterator[tuple[str, Any, Any]]:
    """(dotted key, loaded value, default value) for each leaf key of ``raw`` (params.yaml's mapping
    for ``cls``); a nested dataclass is walked, an inline one found by its keys."""
    _own, inlined = _fields(cls)
    hints = _hints(cls)
    owner = {k: name for name in inlined for k in _keys(hints[name])}
    for key, value in raw.items():
        if key in owner:
            name = owner[key]
            yield from _walk(hints[name], {key: value}, getattr(loaded, name), getattr(default, name), where)
            continue
        dotted, got, code = f"{where}.{key}", getattr(loaded, key), getattr(default, key)
        if isinstance(value, dict) and dataclasses.is_dataclass(code) and type(got) is type(code):
            yield from _walk(type(code), value, got, code, dotted)
        else:
            yield dotted, got, code


def comparisons(profile: str, path: Path = PARAMS) -> Iterator[tuple[str, Any, Any]]:
    """(dotted key, value for ``profile``, code default) for every key params.yaml gives, but the
    ones a section derives from another section and the ``base`` section."""
    params = ParamsFile.read(path, profile)
    for cls in section_classes():
        if cls.SECTION in NOT_COMPARED or cls.SECTION not in params.data:
            continue
        raw = dict(params.data[cls.SECTION] or {})
        derived = cls.derive({}, params) if issubclass(cls, Section) else {}
        given = {k: v for k, v in raw.items() if k not in derived}
        yield from _walk(cls, given, params.section(cls), cls(), cls.SECTION)


def mismatches(profile: str = "full", path: Path = PARAMS) -> list[str]:
    """``key: default X, <profile> Y`` for each key whose code default is not the profile's value."""
    return [
        f"{key}: code default {code!r}, params.yaml {profile} {got!r}"
        for key, got, code in comparisons(profile, path)
        if not same(got, code)
    ]


def test_every_code_default_is_the_full_profile() -> None:
    assert mismatches("full") == []


def test_the_check_names_the_dotted_key(tmp_path: Path) -> None:
    """A full value that differs from its code default is reported by its dotted key."""
    text = PARAMS.read_text().replace("max_completion_tokens: {default: auto, full: 4096}", "max_completion_tokens: 7")
    assert text != PARAMS.read_text()
    (tmp_path / "params.yaml").write_text(text)
    assert mismatches("full", tmp_path / "params.yaml") == [
        "grpo.rollout.max_completion_tokens: code default 4096, params.yaml full 7"
    ]


def _by_profile(value: Any) -> bool:
    """Whether ``value`` is or holds a ``{profile: value}`` mapping."""
    if isinstance(value, dict):
        return (bool(value) and set(value) <= set(PROFILES)) or any(_by_profile(v) for v in value.values())
    return isinstance(value, list) and any(_by_profile(v) for v in value)


@pytest.mark.parametrize("profile", PROFILES)
def test_a_key_left_out_takes_the_code_default(tmp_path: Path, profile: str) -> None:
    """Dropping from params.yaml every compared key whose value is the same for every profile leaves
    every loaded section as it was (a nested key too: ``grpo.lora.dropout`` left out is
    ``GRPOParams().lora.dropout``, not ``LoRAParams().dropout``)."""
    data = load_params(PARAMS)
    dropped = 0
    for key, _got, _code in comparisons("full"):
        *parents, leaf = key.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node and not _by_profile(node[leaf]):
            del node[leaf]
            dropped += 1
    assert dropped > 100
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    before, after = ParamsFile.read(PARAMS, profile), ParamsFile.read(tmp_path / "params.yaml", profile)
    for cls in section_classes():
        if cls.SECTION in after.data or cls.SECTION == "base":
            assert after.section(cls, missing_ok=True) == before.section(cls, missing_ok=True), cls.SECTION
