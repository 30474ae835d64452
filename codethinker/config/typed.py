"""Plain mappings to frozen, typed dataclasses: the strict builder under :func:`codethinker.config.load_config`
(and :func:`from_mapping`, for a mapping that is no params section). A key the dataclass lacks (with the
closest one it has), a value of the wrong type and a number outside its field's :func:`bounded` limits are a
:class:`ConfigError` naming the dotted key.

>>> from dataclasses import dataclass, field
>>> @dataclass(frozen=True)
... class Lr:
...     rate: float = field(default=0.1, metadata=bounded("the step size", gt=0))
>>> from_mapping(Lr, {"rate": 0.5}).rate
0.5
>>> from_mapping(Lr, {"rte": 0.5}, "opt")
Traceback (most recent call last):
...
codethinker.config.typed.ConfigError: opt.rte: unknown key (opt has: rate); did you mean rate?
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import operator
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from codethinker.params import ParamsError

__all__ = ["ConfigError", "as_dict", "bounded", "build", "closest", "from_mapping", "inline", "show"]

T = TypeVar("T")


class ConfigError(ParamsError):
    """A params section (or a mapping built like one) has an unknown key, a wrong type or a bad value."""


def inline(help: str) -> dict[str, Any]:
    """The metadata of a field whose class's keys sit in the section itself, not under the field's
    name: ``params: SFTParams = field(default_factory=SFTParams, metadata=inline("..."))``."""
    return {"help": help, "inline": True}


def bounded(help: str, *, ge: float | None = None, gt: float | None = None, le: float | None = None) -> dict[str, Any]:
    """The metadata of a numeric field with bounds the loader checks (``None``, where the type allows it,
    is not checked): ``min_lines: int = field(default=5, metadata=bounded("...", ge=0))``."""
    limits = {k: v for k, v in (("ge", ge), ("gt", gt), ("le", le)) if v is not None}
    return {"help": help, **limits}


def closest(name: Any, known: Any) -> str | None:
    """The one of ``known`` that ``name`` looks like a misspelling of (None: none is close)."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.75)
    return close[0] if close else None


def as_dict(obj: Any) -> dict[str, Any]:
    """:func:`dataclasses.asdict`, with the keys of an :func:`inline` field in its parent."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.metadata.get("inline"):
            out.update(as_dict(value))
        else:
            out[f.name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return as_dict(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    return copy.deepcopy(value)


def from_mapping(cls: type[T], data: Mapping[str, Any] | None, where: str = "") -> T:
    """``cls`` from a plain mapping (``None``: every default), as strict as :func:`load_config`;
    ``where`` names the mapping in errors (``crm`` -> ``crm.rcc: unknown key``)."""
    return build(cls, {} if data is None else data, "", where)


# --------------------------------------------------------------------------- building


def _at(origin: str, where: str) -> str:
    return ": ".join(s for s in (origin, where) if s)


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fields(cls: type) -> tuple[dict[str, dataclasses.Field], dict[str, dataclasses.Field]]:
    """``cls``'s own keys and its :func:`inline` fields (``base`` of a :class:`Section` is neither)."""
    own, inlined = {}, {}
    for f in dataclasses.fields(cls):
        if f.init and not f.metadata.get("from_base"):
            (inlined if f.metadata.get("inline") else own)[f.name] = f
    return own, inlined


def _keys(cls: type) -> set[str]:
    """Every key a mapping for ``cls`` may hold."""
    own, inlined = _fields(cls)
    return set(own).union(*(_keys(_hints(cls)[name]) for name in inlined))


def _default(f: dataclasses.Field, parent: Any) -> Any:
    """Field ``f``'s default: its value in ``parent`` (the enclosing field's default) when given."""
    if parent is not None:
        return copy.deepcopy(getattr(parent, f.name))
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default  # MISSING when there is none


def build(
    cls: type[T], data: Any, origin: str, where: str, extra: dict[str, Any] | None = None, parent: Any = None
) -> T:
    """``cls`` from ``data``; a key ``data`` leaves out takes its value in ``parent`` (the default of
    the field being built: ``GRPOParams().lora``, not ``LoRAParams()``), else its field's default."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{_at(origin, where)}: expected a mapping, got {show(data)}")
    own, inlined = _fields(cls)
    hints = _hints(cls)
    owner = {k: name for name in inlined for k in _keys(hints[name])}
    values: dict[str, Any] = {}
    parts: dict[str, dict[str, Any]] = {name: {} for name in inlined}
    for key, value in data.items():
        if key in own:
            values[key] = _check(value, hints[key], origin, _join(where, key), _default(own[key], parent))
            _check_bounds(values[key], own[key], origin, _join(where, key))
        elif key in owner:
            parts[owner[key]][key] = value
        else:
            names = sorted(set(own) | set(owner))
            hint = f"; did you mean {c}?" if (c := closest(key, names)) else ""
            has = f"{where or cls.__name__} has: {', '.join(names)}"
            raise ConfigError(f"{_at(origin, _join(where, key))}: unknown key ({has}){hint}")
    for name, f in own.items():
        if name not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{_at(origin, _join(where, name))}: missing key")
        if name not in values and parent is not None:
            values[name] = _default(f, parent)
    for name, f in inlined.items():
        values[name] = build(hints[name], parts[name], origin, where, parent=_default(f, parent))
    try:
        return cls(**values, **(extra or {}))
    except (ValueError, TypeError) as exc:  # the dataclass's own checks (__post_init__)
        raise ConfigError(f"{_at(origin, where)}: {exc}" if _at(origin, where) else str(exc)) from None


def _check_bounds(value: Any, f: dataclasses.Field, origin: str, where: str) -> None:
    """A :class:`ConfigError` when the number ``value`` is outside field ``f``'s :func:`bounded` limits."""
    if type(value) not in (int, float):
        return
    for key, ok, sign in (("ge", operator.ge, ">="), ("gt", operator.gt, ">"), ("le", operator.le, "<=")):
        limit = f.metadata.get(key)
        if limit is not None and not ok(value, limit):  # NaN is within no bounds
            raise ConfigError(f"{_at(origin, where)}: must be {sign} {limit}, got {value!r}")


def _type_name(tp: Any) -> str:
    if tp is type(None):
        return "null"
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp)) if typing.get_origin(tp) is None else str(tp)


_SCALARS: dict[Any, Any] = {
    bool: lambda v: type(v) is bool,
    int: lambda v: type(v) is int,
    float: lambda v: type(v) in (int, float),  # kept as written: 3 stays 3 (fingerprints, logged params)
    str: lambda v: isinstance(v, str),
    type(None): lambda v: v is None,
}


def _check(value: Any, tp: Any, origin: str, where: str, default: Any = None) -> Any:
    """``value`` checked against the field type ``tp`` (a nested dataclass is built, its keys left
    out taken from ``default``, the field's default, when that is a ``tp``)."""
    kind, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if kind in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _check(value, arg, origin, where, default)
            except ConfigError as exc:
                errors.append(exc)
        if len(errors) == 1 and isinstance(value, Mapping):
            raise errors[0]
    elif dataclasses.is_dataclass(tp):
        parent = default if isinstance(default, tp) else None
        return build(tp, {} if value is None else value, origin, where, parent=parent)  # type: ignore[arg-type]
    elif kind is list:
        if isinstance(value, list):
            return [_check(v, args[0] if args else Any, origin, f"{where}[{i}]") for i, v in enumerate(value)]
    elif kind is dict:
        if isinstance(value, dict):
            return {k: _check(v, args[1] if args else Any, origin, _join(where, k)) for k, v in value.items()}
    elif tp in _SCALARS:
        if _SCALARS[tp](value):
            return value
    elif kind is None and isinstance(tp, type):
        if isinstance(value, tp):
            return value
    else:
        return value  # a type not checked here (the dataclass checks it)
    raise ConfigError(f"{_at(origin, where)}: expected {_type_name(tp)}, got {show(value)}")
