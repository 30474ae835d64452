"""The layer rules of docs/architecture.md, checked on the source: what each layer may import (the sandbox
package's own rule: tests/test_sandbox_package.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the command line: it may call into ops (MLflow runs of `codethinker eval`, `dvc exp show` for the report)
CLI_LAYER = {"codethinker/cli.py", "codethinker/evaluation/commands.py"}
PREFLIGHT = "codethinker.preflight"


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
    # the one reader of dvc.yaml (plain YAML, no DVC import) serves the preflight too
    allowed = ("codethinker.ops.dvcfile",) if _under(rel.removesuffix(".py").replace("/", "."), PREFLIGHT) else ()
    bad = sorted(n for n in _imports(path) if _under(n, *banned) and not _under(n, *allowed))
    assert not bad, f"{rel} imports {bad}"


@pytest.mark.parametrize("path", _files("stages"), ids=str)
def test_stages_read_params_only_through_the_typed_loader(path: Path) -> None:
    """One way to read params.yaml: ``load_config`` (codethinker.config), never the raw dict helpers."""
    bad = sorted(n for n in _imports(path) if _under(n, "codethinker.params", "yaml"))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(folder: str = "codethinker") -> dict[str, set[str]]:
    """Module -> the project modules it imports, lazy imports inside functions included (``from a import b``
    where ``a.b`` is a module counts as importing ``a.b``, as import-linter counts it)."""
    files = {_module_name(p): p for p in _files(folder)}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names)
        graph[name] = set()
        for t in targets:
            while t and t not in files:  # `import a.b.c`'s function -> its module
                t = t.rpartition(".")[0]
            if t and t != name:
                graph[name].add(t)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each an import circle), sorted."""
    import networkx as nx

    g = nx.DiGraph([(a, b) for a, bs in graph.items() for b in bs])
    return sorted(sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1)


def test_no_import_circle_in_the_package() -> None:
    assert import_cycles(import_graph()) == []


def test_the_circle_check_sees_a_lazy_import_circle() -> None:
    graph = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": {"a.x"}}
    assert import_cycles(graph) == [["a.x", "a.y", "a.z"]]
    assert any(import_graph()["codethinker.training.grpo_data"])  # the graph reads the real package


@pytest.mark.parametrize("path", _files("codethinker") + _files("stages") + _files("flows"), ids=str)
def test_no_module_over_400_lines(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 400, f"{path.relative_to(ROOT)}: split it by concern"


def test_dvc_yaml_has_one_reader() -> None:
    """Only ops/dvcfile.py opens dvc.yaml as YAML (DVC's own API, ops/dvc_api.py, resolves it as DVC does)."""
    readers = [
        str(p.relative_to(ROOT))
        for p in _files("codethinker") + _files("flows") + _files("stages")
        if "yaml" in _imports(p) and '"dvc.yaml"' in p.read_text()
    ]
    assert readers == ["codethinker/ops/dvcfile.py"]


# --- tasks: the unit of the design (codethinker/tasks) ------------------------------------------------------
TASKS = "codethinker.tasks"


@pytest.mark.parametrize("path", _files("codethinker/tasks"), ids=str)
def test_a_task_sits_below_the_trainers_and_evaluators(path: Path) -> None:
    """A task may use rewards, the tracer, the sandbox, data readers; never a trainer, an engine or ops."""
    banned = ("codethinker.training", "codethinker.engines", "codethinker.evaluation", "codethinker.ops")
    bad = sorted(n for n in _imports(path) if _under(n, *banned))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def task_branches(source: str) -> list[int]:
    """Lines that ask which task a value is: ``task ==``/``!=``/``in``/``not in`` (``task``, ``x.task``)."""

    def is_task(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "task") or (
            isinstance(node, ast.Attribute) and node.attr == "task"
        )

    ops = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
    return [
        n.lineno
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Compare)
        and any(isinstance(o, ops) for o in n.ops)
        and (is_task(n.left) or any(is_task(c) for c in n.comparators))
    ]


def test_the_branch_check_sees_the_forms() -> None:
    src = "if p.task == 'codegen': pass\nx = 1 if task in T else 2\nfor task in tasks: pass\ny = t.name == 'a'\n"
    assert task_branches(src) == [1, 2]


@pytest.mark.parametrize("path", _files("codethinker") + _files("stages") + _files("flows"), ids=str)
def test_nothing_outside_the_tasks_and_the_config_asks_which_task_it_serves(path: Path) -> None:
    rel = path.relative_to(ROOT)
    if rel.parts[:2] in (("codethinker", "tasks"), ("codethinker", "config")):
        return
    assert task_branches(path.read_text()) == [], f"{rel} branches on the task"
