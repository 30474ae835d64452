"""The code-generation recipes in ``codethinker report``: experiments grouped by their params
(grpo_codegen.reward, seed), one row per recipe with mean ± std over seeds, from fake ``dvc exp show --json``."""

from __future__ import annotations

import copy
import json
import shlex

from codethinker.evaluation import codegen_report
from codethinker.evaluation.codegen_report import RECIPES, collect, commands, table
from codethinker.evaluation.report import render_report

from .test_micro_table import PARAMS, _params_for


def _rev(name: str, cmd: str, pass1: float, tokens: float, cycles: float | None = None, kind: str | None = None):
    params = _params_for(cmd)
    after = {"pass1": pass1, "tokens": tokens, "fmt_rate": 0.5, "n": 29}
    if cycles is not None:
        after["cycles"] = cycles
    metrics = {
        "reward_kind": kind or params["grpo_codegen"]["reward"],
        "after_grpo": after,
        "after_sft": {"pass1": 0.0},
    }
    return {
        "rev": "1" * 40,
        "name": name,
        "data": {
            "params": {"params.yaml": {"data": params}},
            "metrics": {"metrics/codegen_eval.json": {"data": metrics}},
        },
    }


def _exp_show(revs: list[dict]) -> str:
    workspace = {"rev": "workspace", "data": {"params": {"params.yaml": {"data": copy.deepcopy(PARAMS)}}}}
    return json.dumps([workspace, {"rev": "2" * 40, "name": "main", "experiments": [{"revs": revs}]}])


def test_commands_set_existing_params_and_name_each_recipe_and_seed():
    cmds = commands(seeds=(0, 1))
    assert len(cmds) == 2 * len(RECIPES)
    for cmd in cmds:
        params = _params_for(cmd)  # fails on a key params.yaml lacks
        assert params["grpo_codegen"]["reward"] in RECIPES and params["grpo_codegen"]["seed"] in (0, 1)
        assert shlex.split(cmd)[:4] == ["dvc", "exp", "run", "codegen_eval"]


def test_collect_groups_by_params_and_the_table_has_one_row_per_recipe():
    c = commands(seeds=(0, 1, 2))
    by = {cmd.split(" -n ")[1].split()[0]: cmd for cmd in c}
    revs = [
        _rev("a", by["cg-codegen_outcome-s0"], 0.10, 100.0),
        _rev("b", by["cg-codegen_outcome-s1"], 0.20, 120.0),
        _rev("c", by["cg-codegen_outcome-s2"], 0.30, 140.0),
        _rev("d", by["cg-reflexicoder-s0"], 0.40, 300.0, cycles=1.0),
        _rev("e", by["cg-reflexicoder-s1"], 0.50, 340.0, cycles=2.0),
        _rev("old", by["cg-reflexicoder-s2"], 0.90, 10.0, cycles=9.0, kind="codegen_outcome"),  # stale metrics
        _rev("dup", by["cg-codegen_outcome-s0"], 0.99, 1.0),  # the same (recipe, seed) listed later: ignored
        _rev("reasoning", "dvc exp run -S grpo.seed=0", 0.70, 5.0),  # the default recipe, seed 0 again: listed later
        _rev("r1", "dvc exp run -S grpo.seed=7 -S grpo_codegen.reward=recode_outcome", 0.5, 5.0, kind="crm"),  # stale
    ]
    got = collect(_exp_show(revs))
    assert sorted(got) == ["codegen_outcome", "reflexicoder"]
    assert sorted(got["codegen_outcome"]) == [0, 1, 2] and got["codegen_outcome"][0]["name"] == "a"
    assert sorted(got["reflexicoder"]) == [0, 1]
    lines = table(got).splitlines()
    assert len(lines) == 2 + len(RECIPES)
    outcome = next(line for line in lines if "`codegen_outcome`" in line)
    # pass@1 mean 0.2, sample sd 0.1; tokens mean 120, sd 20; no cycles for a one-block recipe
    assert "| 3 (0, 1, 2) | 0.200 ± 0.100 | 120.0 ± 20.0 | 0.500 ± 0.000 | – |" in outcome
    reflexi = next(line for line in lines if "`reflexicoder`" in line)
    assert "| 2 (0, 1) | 0.450 ± 0.071 | 320.0 ± 28.3 | 0.500 ± 0.000 | 1.500 ± 0.707 |" in reflexi
    cg = next(line for line in lines if "`cg_grpo`" in line)
    assert "| 0 | not run | not run | not run | not run |" in cg


def test_the_report_shows_the_section_with_its_commands():
    text = render_report({}, {}, codegen={})
    assert "## Code generation: GRPO recipes" in text and commands()[0] in text
    assert "## Code generation" not in render_report({}, {})
    assert codegen_report.section({})[2].startswith("| recipe (grpo_codegen.reward) | seeds | pass@1 | tokens / answer")
