"""The sandbox's view of the host: only the system folders (``host="system"``); directories it hides
(``SandboxConfig.hide``: a checkout's data, the data mirror) with what the interpreter needs below them
bound back; an interpreter reached through a symbolically linked venv."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import codethinker.contra.values  # noqa: F401  (registers the "call" runner)
from codethinker.sandbox import Job, Sandbox, SandboxConfig
from codethinker.sandbox import bwrap as bw

ROOT = Path(__file__).resolve().parents[1]
LOOK = """
import os
def f(paths):
    out = {}
    for p in paths:
        try:
            out[p] = sorted(os.listdir(p)) if os.path.isdir(p) else open(p).read(20)
        except OSError as exc:
            out[p] = type(exc).__name__
    return out
"""
needs_bwrap = pytest.mark.skipif(not bw.bwrap_available(), reason="bubblewrap cannot start a sandbox here")


class TestMaskPlan:
    def test_a_hidden_directory_is_a_mask_root_with_the_interpreter_bound_back(self, tmp_path):
        data, venv = tmp_path / "proj", tmp_path / "proj" / ".venv"
        (venv / "lib").mkdir(parents=True)
        (data / "codethinker").mkdir()
        real = str(tmp_path.resolve())
        plan = bw.mask_plan([str(venv), str(data / "codethinker")], hide=["/nonexistent", real + "/proj"])
        assert plan == [("/tmp", [real + "/proj/.venv", real + "/proj/codethinker"])]  # under /tmp: hidden already

    def test_outside_tmp(self):
        plan = bw.mask_plan([str(ROOT / "codethinker"), sys.prefix], hide=[str(ROOT)])
        roots = dict(plan)
        if not str(ROOT.resolve()).startswith(("/tmp/", "/dev/shm/")):
            assert os.path.realpath(str(ROOT / "codethinker")) in roots[str(ROOT.resolve())]

    def test_the_root_itself_is_never_hidden_and_config_checks_the_type(self):
        assert bw.mask_plan([], hide=["/"]) == []
        with pytest.raises(ValueError, match="tuple of paths"):
            SandboxConfig(hide="/data")  # type: ignore[arg-type]


@needs_bwrap
def test_a_sample_sees_nothing_of_a_hidden_checkout_but_the_interpreter():
    cfg = SandboxConfig(timeout_s=5.0, workers=1, hide=(str(ROOT),), isolation="bwrap")
    paths = [str(ROOT), str(ROOT / "pyproject.toml"), str(ROOT / "codethinker" / "__init__.py")]
    with Sandbox(cfg) as sb:
        res = sb.run(Job(LOOK, args=(paths,)))
    assert res.status == "ok", res
    seen = res.value
    assert set(seen[str(ROOT)]) <= {"codethinker", ".venv"}
    assert seen[str(ROOT / "pyproject.toml")] == "FileNotFoundError"
    assert seen[str(ROOT / "codethinker" / "__init__.py")].startswith('"""')


@needs_bwrap
def test_an_interpreter_reached_through_a_linked_venv_starts_the_sandbox(tmp_path):
    """``.venv -> /elsewhere/venv``: the sandbox binds the venv at its real place, so it must exec it there."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("not running in a venv")
    link = tmp_path / "venvlink"
    link.symlink_to(os.path.realpath(sys.prefix), target_is_directory=True)
    exe = link / "bin" / Path(sys.executable).name
    script = textwrap.dedent(
        """
        import codethinker.contra.values
        from codethinker.sandbox import Job, Sandbox, SandboxConfig
        with Sandbox(SandboxConfig(timeout_s=5.0, workers=1, isolation="bwrap")) as sb:
            print(sb.run(Job("def f(x):\\n    return x + 1", args=(1,))).value)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([str(exe), "-c", script], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "2", out.stderr[-2000:]


def test_the_answer_paths_are_the_checkout_and_the_mirror_wherever_the_caller_runs(tmp_path, monkeypatch):
    from codethinker.params import answer_paths

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    monkeypatch.chdir(tmp_path)  # the checkout's params.yaml is read relative to its own folder
    monkeypatch.setenv("CODETHINKER_MIRROR", str(mirror))
    paths = answer_paths()
    assert paths[0] == str(ROOT.resolve()) and str(mirror.resolve()) in paths
    (tmp_path / "params.yaml").write_text("base:\n  mirror: mirror\n")
    monkeypatch.delenv("CODETHINKER_MIRROR")
    assert str(mirror.resolve()) in answer_paths()


@needs_bwrap
def test_a_system_view_shows_no_host_folder_but_the_system_and_the_interpreter():
    """``host="system"``: a file the sample's uid could read anywhere else on the host (here under
    ``/var/tmp``) is absent; ``/usr``, ``/etc``, the interpreter, its site-packages and the package are there."""
    import tempfile

    try:
        elsewhere = Path(tempfile.mkdtemp(prefix="codethinker-view-", dir="/var/tmp"))
    except OSError:
        pytest.skip("/var/tmp is not writable here")
    try:
        elsewhere.chmod(0o755)
        (elsewhere / "answers.txt").write_text("42")
        (elsewhere / "answers.txt").chmod(0o644)
        paths = [str(elsewhere / "answers.txt"), "/etc/passwd", str(ROOT / "codethinker" / "__init__.py")]
        look = LOOK + "\nimport json, collections\n"
        for host, seen_elsewhere in (("all", "42"), ("system", "FileNotFoundError")):
            cfg = SandboxConfig(timeout_s=5.0, workers=1, host=host, isolation="bwrap")
            with Sandbox(cfg) as sb:
                res = sb.run(Job(look, args=(paths,)))
            assert res.status == "ok", res
            assert res.value[paths[0]] == seen_elsewhere, host
            assert res.value[paths[1]] != "FileNotFoundError" and res.value[paths[2]].startswith('"""')
    finally:
        import shutil

        shutil.rmtree(elsewhere, ignore_errors=True)
    with pytest.raises(ValueError, match="host must be"):
        SandboxConfig(host="none")
