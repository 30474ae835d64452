"""The code deps of every dvc.yaml stage, from the import graph: ``make deps`` writes them, a test checks them.

    python scripts/stage_deps.py           # rewrite dvc.yaml's code deps in place
    python scripts/stage_deps.py --check   # exit 1 and name each stage whose code deps differ

A stage's code deps are ``stages/<name>.py`` and every ``codethinker/**/*.py`` (or other stage module) it imports,
transitively, including modules named in string constants (``"codethinker.evaluation.codegen"``, a sandbox runner
``"codethinker.contra.tracer:trace_runner"``), which are imported by name at run time. Modules that cannot
change a stage's outputs (:data:`NOT_DEPS`: the MLflow handle, the log levels and the ops layer) are left out. Only the
``- <path>.py`` items of a ``deps:`` list are rewritten; data deps, comments and everything else stay.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# run bookkeeping (MLflow runs, DVC ownership, the stage runner), the error base class and the libraries' log
# levels (what a stage prints, never what it writes): none of it reaches a stage's outputs
NOT_DEPS = ("codethinker/tracking.py", "codethinker/errors.py", "codethinker/logs.py", "codethinker/ops/")
PACKAGES = ("codethinker", "stages")  # a stage may share code with another stage (grpo_codegen runs grpo's train)
_MODULE_NAME = re.compile(r"codethinker(?:\.\w+)+")
_CODE_ITEM = re.compile(r"^(\s*)- ((?:stages|codethinker)/[\w/]+\.py)\s*(#.*)?$")


def _names(tree: ast.AST) -> list[str]:
    """Module names ``tree`` imports or names in a string constant (``pkg.mod`` or ``pkg.mod:attr``)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names if a.name.split(".")[0] in PACKAGES]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = _MODULE_NAME.fullmatch(node.value.split(":")[0])
            names += [m.group(0)] if m else []
    return names


def closure(path: Path, root: Path = ROOT, seen: set[str] | None = None) -> set[str]:
    """Files under ``root`` that ``path`` imports, transitively (relative paths, ``path`` included)."""
    seen = set() if seen is None else seen
    seen.add(str(path.relative_to(root)))
    for name in _names(ast.parse(path.read_text(), str(path))):
        parts = name.split(".")
        for i in range(2, len(parts) + 1):  # a package's __init__ runs before its modules
            init = root.joinpath(*parts[:i], "__init__.py")
            if init.is_file() and str(init.relative_to(root)) not in seen:
                closure(init, root, seen)
        for i in range(len(parts), 1, -1):  # "pkg.mod.Class": the longest prefix that is a module
            f = root.joinpath(*parts[:i]).with_suffix(".py")
            if f.is_file():
                if str(f.relative_to(root)) not in seen:
                    closure(f, root, seen)
                break
    return seen


def stage_code_deps(stage: str, root: Path = ROOT) -> list[str]:
    """``stages/<stage>.py`` first, then the library modules it runs, sorted."""
    files = closure(root / "stages" / f"{stage}.py", root)
    keep = sorted(
        f for f in files if not f.startswith(NOT_DEPS) and not (f.endswith("__init__.py") and _empty(root / f))
    )
    return sorted(keep, key=lambda f: (not f.startswith("stages/"), f))


def _empty(path: Path) -> bool:
    return not path.read_text().strip()


def rewrite(text: str, root: Path = ROOT) -> tuple[str, dict[str, tuple[list[str], list[str]]]]:
    """dvc.yaml ``text`` with each stage's code deps regenerated; also ``{stage: (old, new)}`` that differ.

    A stage's code deps are written once, where its first code dep was; its other code deps are dropped.
    """
    out: list[str] = []
    old: dict[str, list[str]] = {}
    stage = None
    for line in text.splitlines():
        header = re.match(r"^  (\w+):\s*$", line)
        if header:
            stage = header.group(1)
        item = _CODE_ITEM.match(line)
        if not (item and stage is not None):
            out.append(line)
            continue
        if stage not in old:
            old[stage] = []
            out.extend(f"{item.group(1)}- {f}" for f in stage_code_deps(stage, root))
        old[stage].append(item.group(2))
    changed = {s: (o, n) for s, o in old.items() if (n := stage_code_deps(s, root)) != o}
    return "\n".join(out) + "\n", changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="report stages whose code deps differ; write nothing")
    ap.add_argument("--dvc-yaml", type=Path, default=ROOT / "dvc.yaml")
    args = ap.parse_args(argv)
    text, changed = rewrite(args.dvc_yaml.read_text(), args.dvc_yaml.resolve().parent)
    for stage, (old, new) in changed.items():
        gone, added = sorted(set(old) - set(new)), sorted(set(new) - set(old))
        print(f"{stage}: +{added} -{gone}" if gone or added else f"{stage}: order", file=sys.stderr)
    if args.check:
        if changed:
            print(f"{args.dvc_yaml}: code deps are stale; run `make deps`", file=sys.stderr)
        return 1 if changed else 0
    args.dvc_yaml.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
