"""Record files: malformed input names file, row and field; writes are atomic."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.data.io import RecordError, atomic_write, read_jsonl, write_json, write_jsonl

FIELDS = {"task_id": str, "inputs": list}


def test_bad_json_names_file_and_row(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"task_id": "a", "inputs": []}\n{"task_id": "b", "inputs": [\n')
    with pytest.raises(RecordError) as e:
        read_jsonl(p, FIELDS)
    assert e.value.row == 2 and str(p) in str(e.value) and "row 2" in str(e.value)


def test_missing_and_mistyped_field_named(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"task_id": "a", "inputs": []}\n\n{"task_id": "b"}\n')
    with pytest.raises(RecordError, match=r"row 3, field 'inputs': missing field"):
        read_jsonl(p, FIELDS)
    p.write_text('{"task_id": 7, "inputs": []}\n')
    with pytest.raises(RecordError, match=r"row 1, field 'task_id': expected str, got int"):
        read_jsonl(p, FIELDS)
    p.write_text("[1, 2]\n")
    with pytest.raises(RecordError, match="expected a JSON object"):
        read_jsonl(p, FIELDS)


def test_bool_is_not_int(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"n": true}\n')
    with pytest.raises(RecordError, match="field 'n'"):
        read_jsonl(p, {"n": int})


def test_missing_file_and_broken_gzip(tmp_path):
    with pytest.raises(RecordError, match="file not found"):
        read_jsonl(tmp_path / "nope.jsonl")
    bad = tmp_path / "x.jsonl.gz"
    bad.write_bytes(b"not gzip at all")
    with pytest.raises(RecordError, match="cannot read"):
        read_jsonl(bad)
    good = tmp_path / "y.jsonl.gz"
    with gzip.open(good, "wt") as fh:
        fh.write('{"a": 1}\n')
    assert read_jsonl(good) == [{"a": 1}]


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    p = tmp_path / "out.jsonl"
    write_jsonl(p, [{"a": 1}])

    def rows():
        yield {"a": 2}
        raise RuntimeError("stage failed mid-write")

    with pytest.raises(RuntimeError):
        write_jsonl(p, rows())
    assert read_jsonl(p) == [{"a": 1}]
    assert [q.name for q in tmp_path.iterdir()] == ["out.jsonl"]  # no temp file left behind
    with pytest.raises(ZeroDivisionError), atomic_write(tmp_path / "new.json") as fh:
        fh.write("partial")
        _ = 1 / 0
    assert not (tmp_path / "new.json").exists()


def test_write_json(tmp_path):
    write_json(tmp_path / "m" / "x.json", {"a": {"b": 1}})
    assert json.loads((tmp_path / "m" / "x.json").read_text()) == {"a": {"b": 1}}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=8), json_values, max_size=5), max_size=5))
def test_roundtrip(tmp_path_factory, rows):
    p = tmp_path_factory.mktemp("rt") / "x.jsonl"
    assert write_jsonl(p, rows) == len(rows)
    assert read_jsonl(p) == rows
