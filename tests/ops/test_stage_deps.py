"""scripts/stage_deps.py: dvc.yaml's code deps are the stages' import closures (``make deps``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stage_deps():
    spec = importlib.util.spec_from_file_location("stage_deps", ROOT / "scripts" / "stage_deps.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["stage_deps"] = mod
    spec.loader.exec_module(mod)
    return mod


def _toy(tmp_path: Path) -> Path:
    files = {
        "stages/a.py": "from codethinker.lib import f\n",
        "codethinker/__init__.py": "",
        "codethinker/lib.py": "RUNNER = 'codethinker.runner:run'\nLOOP = 'codethinker.loop.Loop'\nimport os\n",
        "codethinker/runner.py": "from codethinker.tracking import x\n",
        "codethinker/loop.py": "",
        "codethinker/tracking.py": "",
        "codethinker/unused.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_closure_follows_imports_and_module_names_in_strings(stage_deps, tmp_path: Path) -> None:
    root = _toy(tmp_path)
    assert stage_deps.stage_code_deps("a", root) == [
        "stages/a.py",
        "codethinker/lib.py",
        "codethinker/loop.py",
        "codethinker/runner.py",
    ]  # tracking.py is bookkeeping (NOT_DEPS); unused.py is never imported; the empty __init__ is left out


def test_rewrite_replaces_code_deps_once_and_keeps_data_deps_and_comments(stage_deps, tmp_path: Path) -> None:
    root = _toy(tmp_path)
    text = (
        "stages:\n  a:\n    cmd: python -m stages.a\n    deps:\n      - codethinker/unused.py\n"
        "      - data/in.jsonl    # the input\n      - stages/a.py\n    outs:\n      - data/out\n"
    )
    new, changed = stage_deps.rewrite(text, root)
    assert new == (
        "stages:\n  a:\n    cmd: python -m stages.a\n    deps:\n      - stages/a.py\n      - codethinker/lib.py\n"
        "      - codethinker/loop.py\n      - codethinker/runner.py\n      - data/in.jsonl    # the input\n"
        "    outs:\n      - data/out\n"
    )
    assert changed == {"a": (["codethinker/unused.py", "stages/a.py"], stage_deps.stage_code_deps("a", root))}
    assert stage_deps.rewrite(new, root) == (new, {})


def test_the_project_dvc_yaml_is_up_to_date(stage_deps) -> None:
    """A change to any library module a stage runs must make DVC rerun that stage: `make deps` after an
    import is added or removed."""
    _, changed = stage_deps.rewrite((ROOT / "dvc.yaml").read_text(), ROOT)
    assert not changed, f"dvc.yaml code deps are stale (run `make deps`): {sorted(changed)}"


def test_dvc_yaml_lists_stages_in_pipeline_order() -> None:
    """dvc.yaml reads top to bottom as the pipeline: a stage comes after every stage whose outputs it reads."""
    import yaml

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]

    def paths(entry: dict, key: str) -> list[str]:
        body = entry.get("do") or entry
        return [next(iter(x)) if isinstance(x, dict) else x for x in body.get(key) or []]

    outs = {name: paths(e, "outs") + paths(e, "metrics") + paths(e, "plots") for name, e in stages.items()}
    seen: set[str] = set()
    late = []
    for name, entry in stages.items():
        for dep in paths(entry, "deps"):
            for other, produced in outs.items():
                hit = any(
                    dep == o or dep.startswith(o.rstrip("/") + "/") or ("${" in o and _same(dep, o)) for o in produced
                )
                if other != name and hit and other not in seen:
                    late.append(f"{name} reads {dep} from {other}, listed after it")
        seen.add(name)
    assert not late, late


def _same(dep: str, out: str) -> bool:
    """``models/${key}`` style outs of a foreach stage match a dep with any key there."""
    import re

    return re.fullmatch(re.escape(out).replace(r"\$\{key\}", r"[\w-]+"), dep) is not None
