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

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from codethinker.config.typed import ConfigError, as_dict, bounded, build, closest, from_mapping, inline, show
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
    *("codegen", "recode", "bootstrap", "sft", "grpo", "grpo_codegen", "train_eval", "codegen_eval", "eval_truth"),
    "evaluate",
    *("generalize", "flow"),
)


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
            what = f"must be a mapping, got {show(base)}" if not isinstance(base, dict) else f"got {name!r}"
            what += f"; did you mean {c}?" if isinstance(base, dict) and (c := closest(name, PROFILES)) else ""
            raise ConfigError(f"{p}: base.profile: must be one of {', '.join(PROFILES)}; {what}")
        for key in [k for k in raw if k not in sections] if sections is not None else []:
            hint = f"did you mean {c}?" if (c := closest(key, sections)) else f"the sections: {', '.join(sections)}"
            raise ConfigError(f"{p}: {key}: unknown section ({hint})")
        try:
            data = resolve_params(raw, profile)
        except ParamsError as exc:
            raise ConfigError(f"{p}: {exc}") from None
        return cls(p, data, build(BaseConfig, data["base"], str(p), "base"))

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
            raise ConfigError(f"{self.path}: {name}: expected a mapping, got {show(raw)}")
        extra: dict[str, Any] = {}
        if isinstance(cls, type) and issubclass(cls, Section):
            raw, extra = cls.derive(dict(raw), self), {"base": self.base}
        return build(cls, raw, str(self.path), name, extra)

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
