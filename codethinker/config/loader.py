"""The one params.yaml loader: a section in, its frozen, typed dataclass out.

:func:`load_config` reads params.yaml, resolves every ``{profile: value}`` mapping for ``base.profile``
(:func:`codethinker.params.resolve_params`) and builds the section's dataclass (``SECTION`` names the
section): a nested mapping becomes its nested dataclass, a field marked :func:`inline` takes its
class's keys from the section itself (``sft``'s ``epochs`` is :class:`SFTParams`' ``epochs``). A key
the dataclass lacks, a value of the wrong type and a number outside its field's bounds (``ge``, ``gt``,
``le`` in the field's metadata, :func:`bounded`) are errors naming the file and the dotted key::

    params.yaml: sft.lora.rank: unknown key (sft.lora has: alpha, dropout, r, target_modules)
    params.yaml: ast_filter.min_lines: must be >= 0, got -3

The whole file is checked when a stage reads it (:func:`load_config`), whichever section it asks for:
a top-level key that is no section of :data:`SECTIONS` (``ast_filtr: did you mean ast_filter?``) and a
key given twice in one mapping (:func:`codethinker.params.load_yaml`: YAML would keep the last one
silently) stop every stage before it writes anything. :meth:`ParamsFile.read` checks the sections only
when given them: the flow and preflight read other projects' params files too (the ops tests' toy).

The dataclass field defaults are the only defaults in code, and one rule ties them to params.yaml:
**a field's default is its value for the** ``full`` **profile** (the library's scale, what a user
building the dataclass directly gets). params.yaml gives that same value for ``full`` or leaves the
key out; the ``default`` and ``paper`` values are the only ones that differ, and they live in
params.yaml alone (``sft.learning_rate: {default: 3.0e-3, full: 1.0e-4}`` with
``SFTParams.learning_rate = 1e-4``). ``tests/config/test_defaults.py`` fails naming the dotted key
where they disagree. Outside the rule: ``base`` (the profile itself and this checkout's mirror
folders) and the keys a section derives from another section when null. A key params.yaml leaves
out takes its default; a nested one the default of the field it sits in (``grpo.lora.dropout``:
``GRPOParams().lora.dropout``). What a section takes from another one (``base.seed``,
``model.base``) its class says in :meth:`Section.derive`. :func:`from_mapping` builds any
dataclass from a plain mapping the same way (the reward settings verl hands the reward function).

>>> from codethinker.config.data import AstFilterConfig
>>> load_config(AstFilterConfig).min_lines  # doctest: +SKIP
5
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import operator
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from codethinker.params import PROFILES, ParamsError, load_params, mirror_root, resolve_params

__all__ = [
    "POLICY",
    "SECTIONS",
    "BaseConfig",
    "ConfigError",
    "ModelConfig",
    "ParamsFile",
    "Section",
    "as_dict",
    "bounded",
    "fill",
    "from_mapping",
    "inline",
    "load_config",
    "policy_model",
]

T = TypeVar("T")
POLICY = "models/base"  # the policy when model.base is not set: the bootstrap stage's tiny model
# params.yaml's sections: the SECTION of every section class, and the Prefect flow's optional ``flow``
# (tests/config/test_params_file.py keeps them equal); listed here so that reading the file imports no
# stage's library code
SECTIONS = (
    *("base", "model", "fetch", "ast_filter", "gen_inputs", "synth", "exec_filter", "dedup", "contra_sft"),
    *("codegen", "recode", "bootstrap", "sft", "grpo", "train_eval", "codegen_eval", "eval_truth", "evaluate"),
    *("generalize", "flow"),
)


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


def _closest(name: Any, known: Any) -> str | None:
    """The one of ``known`` that ``name`` looks like a misspelling of (None: none is close)."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.75)
    return close[0] if close else None


@dataclass(frozen=True)
class BaseConfig:
    """``base``: what every stage shares."""

    SECTION: ClassVar[str] = "base"
    profile: str = field(default="default", metadata={"help": f"one of {', '.join(PROFILES)}: the run's scale"})
    seed: int = field(default=0, metadata={"help": "the seed every stage derives its own from"})
    mirror: str | None = field(default=None, metadata={"help": "local mirror of the public data (None: download)"})
    tokenizer_mirror: str | None = field(
        default=None, metadata={"help": "folder of the Qwen2 tokenizer (bootstrap.tokenizer: mirror)"}
    )

    def mirror_root(self) -> Path | None:
        """The data mirror: ``$CODETHINKER_MIRROR`` or ``mirror``, when that folder exists."""
        return mirror_root(as_dict(self))


@dataclass(frozen=True)
class ModelConfig:
    """``model``: the policy the training stages start from."""

    SECTION: ClassVar[str] = "model"
    base: str | None = field(
        default=POLICY, metadata={"help": f"policy: a HF causal LM id or local folder (None: {POLICY})"}
    )

    @property
    def policy(self) -> str:
        return self.base or POLICY


@dataclass(frozen=True)
class Section:
    """A stage's section: its keys plus ``base`` (set by the loader, not a key of the section)."""

    SECTION: ClassVar[str] = ""
    base: BaseConfig = field(
        default_factory=BaseConfig, metadata={"help": "params.yaml's base section", "from_base": True}
    )

    @classmethod
    def derive(cls, raw: dict[str, Any], params: ParamsFile) -> dict[str, Any]:
        """``raw`` (the resolved section) completed from other sections; nothing by default."""
        return raw

    def inactive(self) -> set[str]:
        """Keys of :meth:`as_dict` that the mode chosen does not read (``lora`` under full fine-tuning)."""
        return set()

    def as_dict(self) -> dict[str, Any]:
        """The values in effect as plain data (MLflow params): inline fields' keys at the top, as in
        params.yaml; the :meth:`inactive` ones left out."""
        drop = self.inactive()
        return {k: v for k, v in as_dict(self).items() if k not in drop}


def fill(raw: Mapping[str, Any], **values: Any) -> dict[str, Any]:
    """``raw`` with each of ``values`` set where ``raw`` leaves it out or null."""
    return {**raw, **{k: v for k, v in values.items() if raw.get(k) is None}}


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


@dataclass(frozen=True)
class ParamsFile:
    """A params file resolved for one profile; :meth:`section` builds its sections."""

    path: Path
    data: dict[str, Any]
    base: BaseConfig

    @classmethod
    def read(
        cls, path: str | os.PathLike[str] = "params.yaml", profile: str | None = None, *, sections: Any = None
    ) -> ParamsFile:
        """The file resolved for ``profile``; ``sections`` (the names it may hold, :data:`SECTIONS` for the
        project's): any other top-level key is a :class:`ConfigError` (with "did you mean")."""
        p = Path(path)
        raw = load_params(p)
        base = raw.get("base") or {}
        name = profile if profile is not None else (base.get("profile", "default") if isinstance(base, dict) else None)
        if not isinstance(base, dict) or name not in PROFILES:
            what = f"must be a mapping, got {_show(base)}" if not isinstance(base, dict) else f"got {name!r}"
            what += f"; did you mean {c}?" if isinstance(base, dict) and (c := _closest(name, PROFILES)) else ""
            raise ConfigError(f"{p}: base.profile: must be one of {', '.join(PROFILES)}; {what}")
        for key in [k for k in raw if k not in sections] if sections is not None else []:
            hint = f"did you mean {c}?" if (c := _closest(key, sections)) else f"the sections: {', '.join(sections)}"
            raise ConfigError(f"{p}: {key}: unknown section ({hint})")
        try:
            data = resolve_params(raw, profile)
        except ParamsError as exc:
            raise ConfigError(f"{p}: {exc}") from None
        return cls(p, data, _build(BaseConfig, data["base"], str(p), "base"))

    def section(self, cls: type[T], *, missing_ok: bool = False) -> T:
        """Section ``cls.SECTION`` as ``cls``; a missing section is an error unless ``missing_ok``
        (then every value is its default)."""
        name: str = cls.SECTION  # type: ignore[attr-defined]
        if name == "base":
            return self.base  # type: ignore[return-value]
        if name not in self.data and not missing_ok:
            raise ConfigError(f"{self.path}: no section '{name}'")
        raw = self.data.get(name)
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            raise ConfigError(f"{self.path}: {name}: expected a mapping, got {_show(raw)}")
        extra: dict[str, Any] = {}
        if isinstance(cls, type) and issubclass(cls, Section):
            raw, extra = cls.derive(dict(raw), self), {"base": self.base}
        return _build(cls, raw, str(self.path), name, extra)

    @property
    def policy(self) -> str:
        """``model.base``: the policy's local folder or hub id."""
        return self.section(ModelConfig, missing_ok=True).policy


def load_config(
    cls: type[T], path: str | os.PathLike[str] = "params.yaml", *, profile: str | None = None, missing_ok: bool = False
) -> T:
    """Section ``cls.SECTION`` of ``path`` for ``profile`` (default: its ``base.profile``) as ``cls``; every
    top-level key of the file must be one of :data:`SECTIONS`."""
    return ParamsFile.read(path, profile, sections=SECTIONS).section(cls, missing_ok=missing_ok)


def policy_model(path: str | os.PathLike[str] = "params.yaml") -> str:
    """``model.base`` for the current profile: the policy's local folder or hub id."""
    return ParamsFile.read(path).policy


def from_mapping(cls: type[T], data: Mapping[str, Any] | None, where: str = "") -> T:
    """``cls`` from a plain mapping (``None``: every default), as strict as :func:`load_config`;
    ``where`` names the mapping in errors (``crm`` -> ``crm.rcc: unknown key``)."""
    return _build(cls, {} if data is None else data, "", where)


# --------------------------------------------------------------------------- building


def _at(origin: str, where: str) -> str:
    return ": ".join(s for s in (origin, where) if s)


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def _show(value: Any) -> str:
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


def _build(
    cls: type[T], data: Any, origin: str, where: str, extra: dict[str, Any] | None = None, parent: Any = None
) -> T:
    """``cls`` from ``data``; a key ``data`` leaves out takes its value in ``parent`` (the default of
    the field being built: ``GRPOParams().lora``, not ``LoRAParams()``), else its field's default."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{_at(origin, where)}: expected a mapping, got {_show(data)}")
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
            hint = f"; did you mean {c}?" if (c := _closest(key, names)) else ""
            has = f"{where or cls.__name__} has: {', '.join(names)}"
            raise ConfigError(f"{_at(origin, _join(where, key))}: unknown key ({has}){hint}")
    for name, f in own.items():
        if name not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{_at(origin, _join(where, name))}: missing key")
        if name not in values and parent is not None:
            values[name] = _default(f, parent)
    for name, f in inlined.items():
        values[name] = _build(hints[name], parts[name], origin, where, parent=_default(f, parent))
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
        return _build(tp, {} if value is None else value, origin, where, parent=parent)  # type: ignore[arg-type]
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
    raise ConfigError(f"{_at(origin, where)}: expected {_type_name(tp)}, got {_show(value)}")
