"""dvc.yaml against the stages: the code deps are the import closures (``make deps``, scripts/stage_deps.py), the
data paths are the cmd's arguments, written once."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from codethinker.ops.views import HEADLINE_DIR, TABLES

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


def test_a_stage_that_runs_another_stage_s_code_depends_on_its_closure(stage_deps, tmp_path: Path) -> None:
    """grpo_codegen runs grpo's ``train``: editing the grpo stage or what it imports reruns both."""
    root = _toy(tmp_path)
    (root / "stages" / "b.py").write_text("from stages.a import train\n")
    assert stage_deps.stage_code_deps("b", root) == [
        "stages/a.py",
        "stages/b.py",
        "codethinker/lib.py",
        "codethinker/loop.py",
        "codethinker/runner.py",
    ]


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


@pytest.mark.parametrize("stage", ["sft", "grpo", "train_eval", "grpo_codegen", "codegen_data", "reward_model"])
def test_training_stages_do_not_depend_on_the_other_benchmarks_judges(stage_deps, stage: str) -> None:
    """Editing CRUXEval-I's, REval's, a math or a CRUXEval-X judge leaves the training stages up to date: they
    reach the benchmark code only through the code-generation judge (HumanEval's, the codegen reward's)."""
    judges = ("input_prediction", "reval_tasks", "mathbench", "multilingual", "generalize", "benchmarks")
    deps = stage_deps.stage_code_deps(stage)
    assert not [d for d in deps if d.startswith(tuple(f"codethinker/evaluation/{j}" for j in judges))]


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


# --------------------------------------------------------------------------- paths: the cmd's arguments, once

_CODE = re.compile(r"(stages|codethinker)/[\w/]+\.py")
_PATH_PREFIXES = ("data/", "metrics/", "models/", "plots/")


def _listed(body: dict, kind: str) -> list[str]:
    return [next(iter(x)) if isinstance(x, dict) else x for x in body.get(kind) or []]


def _dotted(data: Any, key: str) -> Any:
    for part in key.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*map(_strings, value.values()))
    if isinstance(value, list):
        return set().union(*map(_strings, value))
    return set()


def dvc_stages() -> list[Any]:
    """(address, module, entry) of every dvc.yaml stage, a foreach stage once per key (``evaluate@base``) with
    ``${key}`` and ``${item.<field>}`` filled in from params.yaml (default profile); ``_run``: the command the
    module's docstring shows (a foreach stage's for the key ``base``)."""
    import yaml

    from codethinker.params import load_params, resolve_params

    params = resolve_params(load_params(ROOT / "params.yaml"), "default")
    out = []
    for name, entry in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].items():
        if "foreach" not in entry:
            out.append((name, name, {**entry, "_run": entry["cmd"]}))
            continue
        items = _dotted(params, entry["foreach"].removeprefix("${").removesuffix("}"))
        for key, item in items.items():
            text = yaml.safe_dump(entry["do"]).replace("${key}", key)
            for field, value in item.items():
                text = text.replace("${item." + field + "}", str(value))
            run = entry["do"]["cmd"].replace("${key}", "base")
            out.append((f"{name}@{key}", name, {**yaml.safe_load(text), "_run": run}))
    return [pytest.param(a, m, {**e, "_params": params}, id=a) for a, m, e in out]


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@pytest.mark.parametrize(("address", "module", "entry"), dvc_stages())
def test_a_stage_gets_its_paths_from_its_cmd_once(address: str, module: str, entry: dict) -> None:
    """dvc.yaml's ``cmd`` passes every file a stage reads or writes, the same strings as its deps, outs,
    metrics and plots: each path argument is declared there (or is the folder its declared outs sit in:
    ``--out models/sft`` for ``models/sft/merged``), and each declared data dep, out, metric and plot is a path
    argument (or in such a folder). The one exception: a model folder a parameter of the stage chooses
    (``grpo.init``, ``train_eval.models``, ``model.base``), a dep that the stage reads through that parameter;
    and the views the stage runner derives from the stage's reports (its headline metrics, the plot tables of
    :data:`codethinker.ops.views.TABLES`). The module's docstring shows the command."""
    import shlex

    words = shlex.split(entry["cmd"])
    assert words[:3] == ["python", "-m", f"stages.{module}"], f"{address}: cmd {entry['cmd']!r}"
    mod = importlib.import_module(f"stages.{module}")
    args = getattr(mod, "ARGS", None)
    assert args is not None, f"stages/{module}.py declares no ARGS = stage_args(...) (its paths come from its cmd)"
    try:
        ns = vars(args.parser().parse_args(words[3:]))
    except SystemExit:
        pytest.fail(f"{address}: `{entry['cmd']}` does not parse with stages/{module}.py's ARGS")
    given = [str(v) for name in args.paths for v in (ns[name] if isinstance(ns[name], list) else [ns[name]])]
    deps = [d for d in _listed(entry, "deps") if not _CODE.fullmatch(d)]
    made = _listed(entry, "outs") + _listed(entry, "metrics") + _listed(entry, "plots")
    undeclared = [p for p in given if p not in deps + made and not any(_under(o, p) for o in made)]
    assert not undeclared, f"{address}: cmd paths that are no dep, out, metric or plot: {undeclared}"
    chosen = set().union(*(_strings(_dotted(entry["_params"], k)) for k in entry.get("params") or []))
    made = [p for p in made if not _under(p, str(HEADLINE_DIR)) and Path(p).name not in TABLES]  # the runner's
    missing = [p for p in deps + made if not any(_under(p, g) for g in given) and not (p in deps and p in chosen)]
    assert not missing, f"{address}: declared, but not a path argument of its cmd: {missing}"
    run_line = " ".join(entry["_run"].split())
    assert run_line in " ".join((mod.__doc__ or "").replace("``", " ").split()), f"stages/{module}.py: Run: {run_line}"


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))]
    return {id(n.body[0].value) for n in nodes if n.body and isinstance(n.body[0], ast.Expr)}


@pytest.mark.parametrize("path", sorted((ROOT / "stages").glob("*.py")), ids=lambda p: p.name)
def test_no_stage_names_a_path_in_code(path: Path) -> None:
    """A stage's paths are its cmd arguments: no ``Path("data/...")``, ``"metrics/..."``, ``"models/..."`` or
    ``"plots/..."`` constant (nor an f-string starting so) anywhere in ``stages/`` but the docstrings."""
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    found = [
        f"line {n.lineno}: {n.value!r}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
        if n.value.startswith(_PATH_PREFIXES)
    ]
    assert not found, f"stages/{path.name} names paths in code: {found}"
