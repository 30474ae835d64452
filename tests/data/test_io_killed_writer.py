"""codethinker.data.io: what a writer killed mid-write (SIGKILL: no cleanup runs) leaves is removed by the next
write of the same target, never a live writer's file; an input of no rows is refused by name."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codethinker.data.io import RecordError, atomic_write, read_jsonl, remove_stale_temps, require_rows, write_jsonl

ROOT = Path(__file__).resolve().parents[2]
# a writer that writes part of its output (buffered: its temporary file stays 0 bytes), says so, then waits:
# for SIGKILL, or for a line on stdin to finish
WRITER = """
import sys
from codethinker.data.io import atomic_write
with atomic_write(sys.argv[1]) as fh:
    fh.write('{"writer": "child"}\\n')
    print("writing", flush=True)
    sys.stdin.readline()
"""


def _start_writer(target: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(target)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "writing\n"
    return proc


def _temps(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_writer_killed_mid_write_leaves_a_temp_file_the_next_write_removes(tmp_path):
    target = tmp_path / "functions.jsonl"
    write_jsonl(target, [{"run": 1}])
    proc = _start_writer(target)
    proc.kill()  # SIGKILL mid-write
    assert proc.wait(timeout=30) == -signal.SIGKILL
    [left] = _temps(tmp_path)
    assert left.stat().st_size == 0 and left.name.startswith(f".functions.jsonl.{proc.pid}.")
    assert read_jsonl(target) == [{"run": 1}]  # the output itself is intact
    write_jsonl(target, [{"run": 2}])  # the rerun
    assert _temps(tmp_path) == [] and read_jsonl(target) == [{"run": 2}]


def test_a_live_writers_temp_file_is_left_alone_and_its_rename_succeeds(tmp_path):
    target = tmp_path / "out.jsonl"
    proc = _start_writer(target)
    try:
        [live] = _temps(tmp_path)
        old = time.time() - 3600  # even an old one: its writer holds the lock
        os.utime(live, (old, old))
        write_jsonl(target, [{"writer": "parent"}])  # a second writer of the same target meanwhile
        assert _temps(tmp_path) == [live] and remove_stale_temps(target) == []
        assert read_jsonl(target) == [{"writer": "parent"}]
    finally:
        proc.communicate("done\n", timeout=30)
    assert proc.returncode == 0
    assert read_jsonl(target) == [{"writer": "child"}] and _temps(tmp_path) == []  # the last rename wins


def test_only_the_targets_own_stale_files_are_removed(tmp_path):
    target = tmp_path / "a.jsonl"
    dead = 2**22 + 12345  # above the largest pid Linux allows (PID_MAX_LIMIT, 4,194,304): no such process
    mine = tmp_path / f".a.jsonl.{dead}.abcd_123.tmp"
    other_target = tmp_path / f".a.jsonl.gz.{dead}.abcd_123.tmp"  # another file's writer
    unrelated = tmp_path / "notes.tmp"
    young_unnamed = tmp_path / ".a.jsonl.zz9_8765.tmp"  # a name without a pid: stale only when old
    old_unnamed = tmp_path / ".a.jsonl.yy9_8765.tmp"
    for p in (mine, other_target, unrelated, young_unnamed, old_unnamed):
        p.write_bytes(b"")
    os.utime(old_unnamed, (time.time() - 3600,) * 2)
    with atomic_write(target) as fh:
        fh.write("x\n")
    assert not mine.exists() and not old_unnamed.exists()
    assert other_target.exists() and unrelated.exists() and young_unnamed.exists()


@pytest.mark.parametrize(
    ("name", "content"),
    [("x.jsonl", b""), ("x.jsonl", b"\n  \n"), ("x.json", b" \n"), ("x.csv", b"")],
)
def test_an_input_without_rows_is_refused_by_name(tmp_path, name, content):
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(RecordError, match=rf"^{p}: empty input \(no rows\)"):
        require_rows(p)


def test_gzip_parquet_and_folders(tmp_path):
    import pandas as pd

    empty_gz, full_gz = tmp_path / "e.jsonl.gz", tmp_path / "f.jsonl.gz"
    with gzip.open(empty_gz, "wt") as fh:
        fh.write("\n")
    with gzip.open(full_gz, "wt") as fh:
        fh.write('{"a": 1}\n')
    empty_pq, full_pq = tmp_path / "e.parquet", tmp_path / "f.parquet"
    pd.DataFrame({"a": []}).to_parquet(empty_pq)
    pd.DataFrame({"a": [1]}).to_parquet(full_pq)
    for p in (empty_gz, empty_pq):
        with pytest.raises(RecordError, match="empty input"):
            require_rows(p)
    for p in (full_gz, full_pq, tmp_path):
        require_rows(p)
    with pytest.raises(RecordError, match="file not found"):
        require_rows(tmp_path / "nope.jsonl")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(RecordError, match="cannot read"):
        require_rows(tmp_path / "bad.parquet")
