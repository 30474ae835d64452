"""codethinker.sandbox as a package: it imports nothing from the rest of codethinker, its worker
does not load the parent's pool, and runners are registered by name."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import codethinker.sandbox
from codethinker.sandbox import RUNNERS, Job, Sandbox, SandboxConfig, register_runner

PACKAGE = Path(codethinker.sandbox.__file__).parent
FORBIDDEN = ("codethinker.contra", "codethinker.evaluation", "codethinker.data", "codethinker.training")


def _imports(path: Path) -> list[str]:
    """Every module an ``import`` or ``from ... import`` of ``path`` names (relative ones resolved)."""
    package = ".".join(path.relative_to(PACKAGE.parents[1]).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module) if p)
            out += [module] + [f"{module}.{a.name}" for a in node.names]
    return out


def test_the_package_imports_nothing_from_the_rest_of_codethinker():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 10
    bad = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in files
        for name in _imports(path)
        if name.startswith(FORBIDDEN)
        or (name.startswith("codethinker.") and not name.startswith("codethinker.sandbox"))
    }
    assert not bad, sorted(bad)


def test_the_worker_and_the_api_load_no_contra_and_the_worker_no_pool():
    code = (
        "import json, sys; import codethinker.sandbox.worker.main; w = sorted(sys.modules); "
        "from codethinker.sandbox import Job, Sandbox, SandboxConfig; print(json.dumps([w, sorted(sys.modules)]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    worker, api = json.loads(out)
    assert "codethinker.sandbox.worker.main" in worker and "codethinker.sandbox.pool" not in worker
    assert "codethinker.sandbox.pool" in api
    assert not [m for m in api if m.startswith(FORBIDDEN)]


@pytest.fixture
def registry():
    saved = dict(RUNNERS)
    yield RUNNERS
    RUNNERS.clear()
    RUNNERS.update(saved)


def test_register_runner_checks_its_spec(registry):
    register_runner("test_call", "codethinker.contra.values:run_call")
    register_runner("test_call", "codethinker.contra.values:run_call")  # the same again: nothing happens
    assert registry["test_call"] == "codethinker.contra.values:run_call"
    with pytest.raises(ValueError, match="is registered as"):
        register_runner("test_call", "codethinker.contra.values:canonicalize")
    for spec in ("codethinker.contra.values", ":run_call", "codethinker.contra.values:"):
        with pytest.raises(ValueError, match="module:attr"):
            register_runner("test_bad", spec)
    assert "test_bad" not in registry


def test_a_runner_registered_by_name_runs_and_an_unknown_name_is_an_error(registry):
    register_runner("test_call", "codethinker.contra.values:run_call")
    register_runner("test_missing", "codethinker.no_such_module:runner")
    src = "def f(x, y=0):\n    return {x * 2 + y}"
    jobs = [
        Job(src, args=(20,), kwargs={"y": 2}, runner="test_call"),
        Job(src, args=(1,), runner="test_unregistered"),
        Job(src, args=(1,), runner="test_missing"),
    ]
    with Sandbox(SandboxConfig(timeout_s=5.0, workers=1)) as sb:
        ok, unknown, missing = sb.map(jobs)
    assert ok.status == "ok" and ok.value == {42}, ok
    assert (unknown.status, unknown.error_type) == ("error", "UnknownRunner")
    assert unknown.error_message == "no runner 'test_unregistered'"
    assert (missing.status, missing.error_type) == ("error", "RunnerUnavailable"), missing
    assert "codethinker.no_such_module" in (missing.error_message or "")
