"""Every section of a params file checked at once, in well under two seconds (no torch, no transformers).

``dvc repro`` removes a stage's outputs before its command runs, so a slip in params.yaml found by the
stage itself has already cost the outputs. ``codethinker check-params`` (which ``make run`` and the
Prefect flow run first) reads every section the way its stage will, so a misspelled key is one line with
a suggestion before DVC touches anything:

>>> check_params("params.yaml")  # doctest: +SKIP
['base', 'model', 'fetch', ...]
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Collection

import codethinker.config
from codethinker.config.loader import SECTIONS, BaseConfig, ModelConfig, ParamsFile, Section

__all__ = ["check_params", "section_classes"]


def section_classes() -> list[type[Section]]:
    """Every section class of ``codethinker/config/`` (``base`` and ``model`` included), by section name."""
    found: set[type] = {BaseConfig, ModelConfig}
    for info in pkgutil.iter_modules(codethinker.config.__path__):
        if info.name == "check":
            continue
        module = importlib.import_module(f"codethinker.config.{info.name}")
        found |= {v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Section) and v.SECTION}
    return sorted(found, key=lambda c: c.SECTION)


def check_params(
    path: str | os.PathLike[str] = "params.yaml", profile: str | None = None, only: Collection[str] | None = None
) -> list[str]:
    """Load every section of ``path`` for ``profile`` as its stage will; returns the sections checked.
    ``only``: just these sections (a flow that runs some stages of a project whose other sections are its
    own), without refusing the file's other top-level keys. Raises
    :class:`~codethinker.config.loader.ConfigError` (a :class:`~codethinker.errors.ParamsError`: exit 2) at the
    first bad key or value, naming the file and the dotted key."""
    params = ParamsFile.read(path, profile, sections=SECTIONS if only is None else None)
    checked = []
    for cls in section_classes():
        if only is None or cls.SECTION in only or cls.SECTION in ("base", "model"):
            params.section(cls, missing_ok=True)
            checked.append(cls.SECTION)
    return checked
