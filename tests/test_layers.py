"""The layer rules of docs/architecture.md, checked on the source: what each layer may import (the sandbox
package's own rule: tests/test_sandbox_package.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the command line: it may call into ops (MLflow runs of `codethinker eval`, `dvc exp show` for the report)
CLI_LAYER = {"codethinker/cli.py", "codethinker/evaluation/commands.py"}


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (lazy imports inside functions included)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def _under(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize(
    "path", [p for p in _files("codethinker") if "ops" not in p.relative_to(ROOT).parts[:2]], ids=str
)
def test_the_core_never_imports_ops_stages_flows_dvc_or_prefect(path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    banned = ("stages", "flows", "dvc", "prefect") + (() if rel in CLI_LAYER else ("codethinker.ops",))
    bad = sorted(n for n in _imports(path) if _under(n, *banned))
    assert not bad, f"{rel} imports {bad}"


@pytest.mark.parametrize("path", _files("stages"), ids=str)
def test_stages_read_params_only_through_the_typed_loader(path: Path) -> None:
    """One way to read params.yaml: ``load_config`` (codethinker.config), never the raw dict helpers."""
    bad = sorted(n for n in _imports(path) if _under(n, "codethinker.params", "yaml"))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
