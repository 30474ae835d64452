"""The whole params file is checked when it is read: a key given twice in one mapping, a top-level key that is
no section, a number outside its field's bounds; each a one-line error naming the file and the dotted key."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from codethinker.config import ConfigError, from_mapping, load_config
from codethinker.config.data import AstFilterConfig, ExecFilterConfig
from codethinker.config.loader import SECTIONS, bounded
from codethinker.params import ParamsError, load_params, load_yaml

from .test_defaults import PARAMS, section_classes


def test_the_known_sections_are_the_section_classes_and_the_flows():
    assert sorted(SECTIONS) == sorted({cls.SECTION for cls in section_classes()} | {"flow"})  # flow: flows/dag.py
    assert set(load_params(PARAMS)) <= set(SECTIONS)


def test_the_flows_optional_section_is_accepted(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text(PARAMS.read_text() + "flow:\n  retries: 3\n")
    assert load_config(AstFilterConfig, p).min_lines == 5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\na: 2\n", r"^a: duplicated key at lines 1 and 2 \(YAML would keep the last one silently\)$"),
        ("s:\n  x: 1\n  y:\n    z: 1\n    z: 2\n", r"^s\.y\.z: duplicated key at lines 4 and 5"),
        ("s: [{k: 1, k: 2}]\n", r"^s\[0\]\.k: duplicated key at lines 1 and 1"),
        ("s: {a: 1, a: 1}\n", r"^s\.a: duplicated key"),  # the same value twice: still a slip
    ],
)
def test_a_key_given_twice_is_an_error(text, message):
    with pytest.raises(ParamsError, match=message):
        load_yaml(text)


def test_what_is_no_duplicate_still_loads():
    assert load_yaml("a: &x {b: 1}\nc: *x\nd:\n  <<: *x\n  e: 2\n") == {
        "a": {"b": 1},
        "c": {"b": 1},
        "d": {"b": 1, "e": 2},
    }
    assert load_yaml("") is None and load_yaml("- 1\n- 1\n") == [1, 1]


def _params(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "params.yaml"
    p.write_text(text)
    return p


def test_a_duplicated_section_names_the_file_and_both_lines(tmp_path):
    text = PARAMS.read_text()
    p = _params(tmp_path, text + "ast_filter:\n  min_lines: 40\n")
    first = text.splitlines().index("ast_filter:") + 1
    with pytest.raises(ParamsError, match=rf"^{p}: ast_filter: duplicated key at lines {first} and "):
        load_config(AstFilterConfig, p)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("ast_filtr:\n  min_lines: 3\n", r"ast_filtr: unknown section \(did you mean ast_filter\?\)$"),
        ("evalute: {}\n", r"evalute: unknown section \(did you mean evaluate\?\)$"),
        ("notes: x\n", r"notes: unknown section \(the sections: base, model, fetch, "),
    ],
)
def test_a_section_no_stage_reads_is_an_error_whatever_section_is_asked_for(tmp_path, extra, message):
    p = _params(tmp_path, PARAMS.read_text() + extra)
    for cls in (AstFilterConfig, ExecFilterConfig):
        with pytest.raises(ConfigError, match=rf"^{p}: {message}"):
            load_config(cls, p)


@pytest.mark.parametrize(
    ("old", "new", "cls", "message"),
    [
        ("  min_lines: 5 ", "  min_lines: -3 ", AstFilterConfig, r"ast_filter\.min_lines: must be >= 0, got -3$"),
        ("  timeout_s: 2.0 ", "  timeout_s: 0 ", ExecFilterConfig, r"exec_filter\.timeout_s: must be > 0, got 0$"),
        ("  workers: null ", "  workers: 0 ", ExecFilterConfig, r"exec_filter\.workers: must be >= 1, got 0$"),
        (
            "  min_lines: 5 ",
            "  min_line: 5 ",
            AstFilterConfig,
            r"ast_filter\.min_line: unknown key .*; did you mean min_lines\?$",
        ),
    ],
)
def test_a_value_out_of_bounds_names_the_key(tmp_path, old, new, cls, message):
    text = PARAMS.read_text()
    section = text.index(f"\n{cls.SECTION}:\n")
    assert text.index(old) > section and text.count(old, 0, section) == 0  # the first one is the section's
    p = _params(tmp_path, text.replace(old, new, 1))
    with pytest.raises(ConfigError, match=rf"^{p}: {message}"):
        load_config(cls, p)


@dataclass(frozen=True)
class _Bounded:
    n: int = field(default=1, metadata=bounded("a count", ge=0))
    share: float = field(default=0.5, metadata=bounded("a share", gt=0, le=1))
    maybe: int | None = field(default=None, metadata=bounded("a count or null", ge=1))


def test_bounds_of_a_mapping_built_like_a_section():
    assert from_mapping(_Bounded, {"n": 0, "share": 1, "maybe": None}) == _Bounded(0, 1, None)
    for data, message in [
        ({"n": -1}, r"^x\.n: must be >= 0, got -1$"),
        ({"share": 0.0}, r"^x\.share: must be > 0, got 0\.0$"),
        ({"share": 1.5}, r"^x\.share: must be <= 1, got 1\.5$"),
        ({"share": math.nan}, r"^x\.share: must be > 0, got nan$"),
        ({"maybe": 0}, r"^x\.maybe: must be >= 1, got 0$"),
    ]:
        with pytest.raises(ConfigError, match=message):
            from_mapping(_Bounded, data, "x")
