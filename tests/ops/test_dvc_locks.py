"""What the flow reads from DVC instead of its messages: a stage's ``dvc status --json`` (skipped or
not) and the processes DVC's lock file ``.dvc/tmp/rwlock`` records (who keeps a stage busy), on a
real DVC repo in ``tmp_path``."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from codethinker.ops.dvc_api import rwlock_holders, stage_up_to_date

WAIT = "import pathlib, time\nwhile not pathlib.Path('release').exists(): time.sleep(0.1)\n"
HOLD = WAIT + "pathlib.Path('out.txt').write_text(pathlib.Path('in.txt').read_text())"


def _env() -> dict[str, str]:
    return {**os.environ, "DVC_NO_ANALYTICS": "1"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A DVC repo (no git) with one stage ``hold``: in.txt -> out.txt once the file ``release`` exists."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=root, env=_env(), check=True)
    (root / "hold.py").write_text(HOLD)
    (root / "in.txt").write_text("x\n")
    stage = {"cmd": f"{sys.executable} hold.py", "deps": ["in.txt", "hold.py"], "outs": ["out.txt"]}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"hold": stage}}))
    return root


def _repro(root: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "dvc", "repro", "--single-item", "hold"]
    return subprocess.Popen(cmd, cwd=root, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _held(root: Path, proc: subprocess.Popen) -> set[int]:
    end = time.monotonic() + 120
    while not (holders := rwlock_holders(root, ["in.txt"], ["out.txt"])):
        assert proc.poll() is None and time.monotonic() < end, proc.communicate()[0]
        time.sleep(0.1)
    return holders


def test_rwlock_holders_reads_dvc_lock_file(tmp_path: Path) -> None:
    """Writers of a dep or an out and readers of an out block a stage; readers of a dep do not."""
    tmp = tmp_path / ".dvc" / "tmp"
    tmp.mkdir(parents=True)
    assert rwlock_holders(tmp_path, ["a"], ["b"]) == set()  # no lock file
    root = str(tmp_path.resolve())
    lock = {
        "write": {f"{root}/a": {"pid": 11, "cmd": "dvc repro up"}, f"{root}/other": {"pid": 12, "cmd": "x"}},
        "read": {
            f"{root}/a": [{"pid": 13, "cmd": "dvc repro sibling"}],
            f"{root}/b/part": [{"pid": 14, "cmd": "dvc repro down"}],
        },
    }
    (tmp / "rwlock").write_text(json.dumps(lock))
    assert rwlock_holders(tmp_path, ["a"], ["b"]) == {11, 14}
    (tmp / "rwlock").write_text('{"write": {')  # half written
    assert rwlock_holders(tmp_path, ["a"], ["b"]) == set()


def test_stage_up_to_date_from_dvc_status_json(repo: Path) -> None:
    assert stage_up_to_date("hold", repo, _env()) is False
    (repo / "release").touch()
    assert _repro(repo).wait(timeout=300) == 0
    assert stage_up_to_date("hold", repo, _env()) is True
    (repo / "in.txt").write_text("y\n")
    assert stage_up_to_date("hold", repo, _env()) is False
    assert stage_up_to_date("no-such-stage", repo, _env()) is None


def test_the_flow_finds_who_keeps_a_stage_busy(repo: Path) -> None:
    """A second ``dvc repro`` of a stage another DVC process is running fails; the flow's runner
    names that process from the lock file, as DVC itself wrote it."""
    from flows.dvc_task import _run_dvc

    first = _repro(repo)
    try:
        assert _held(repo, first) == {first.pid}
        rc, _tail, blockers = _run_dvc("hold", str(repo), _env(), False, logging.getLogger("test"))
        assert rc != 0 and blockers == {first.pid}
    finally:
        (repo / "release").touch()
        first.wait(timeout=300)
    assert first.returncode == 0
    assert rwlock_holders(repo, ["in.txt"], ["out.txt"]) == set()
    rc, _tail, blockers = _run_dvc("hold", str(repo), _env(), False, logging.getLogger("test"))
    assert rc == 0 and blockers == set()
