"""Table 2 in miniature: the commands match params.yaml, experiments are grouped by their params
(not their names), and only differences beyond the seed noise are marked; the baseline rewards
(grpo.reward=orm / whitebox) are rows of their own, beside the CRM ablation called ``orm``."""

from __future__ import annotations

import copy
import itertools
import json
import shlex
from pathlib import Path

import yaml

from codethinker.evaluation import micro_table
from codethinker.evaluation.micro_table import BASELINES, METRICS, VARIANTS, collect, commands, table, variant_of

ROOT = Path(__file__).resolve().parents[2]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


def _set(params, dotted, value):
    node = params
    *head, last = dotted.split(".")
    for part in head:
        node = node[part]
    node[last] = value


def _params_for(cmd: str) -> dict:
    """params.yaml as DVC's -S would leave it after ``cmd``; fails on a key params.yaml lacks."""
    params = copy.deepcopy(PARAMS)
    words = shlex.split(cmd)
    for flag, arg in itertools.pairwise(words):
        if flag == "-S":
            key, value = arg.split("=", 1)
            node = params
            for part in key.split(".")[:-1]:
                node = node[part]
            assert key.split(".")[-1] in node, f"{key}: not in params.yaml (dvc exp run -S would refuse it)"
            _set(params, key, yaml.safe_load(value))
    return params


def _rev(name, params, reward, sft_reward=0.5, acc=0.1, reward_kind=None):
    metrics = {
        "after_grpo": {"synth": {"reward": reward, "answer_acc": acc, "rcs": 0.2, "fmt_rate": 0.6}},
        "after_sft": {"synth": {"reward": sft_reward, "answer_acc": 0.05, "rcs": 0.1, "fmt_rate": 0.5}},
    }
    if reward_kind is not None:  # train_eval writes it since the reward became a switch
        metrics["reward_kind"] = reward_kind
    return {
        "rev": "0" * 40,
        "name": name,
        "data": {
            "params": {"params.yaml": {"data": params}},
            "metrics": {"metrics/train_eval.json": {"data": metrics}},
        },
    }


def _exp_show(revs):
    ws = _rev("workspace", PARAMS, 1.0)
    ws["rev"] = "workspace"
    return [ws, {"rev": "a" * 40, "name": "main", "data": {}, "experiments": [{"revs": revs}]}]


class TestCommands:
    def test_every_variant_and_seed_once(self):
        cmds = commands()
        assert len(cmds) == len(VARIANTS) * len(micro_table.SEEDS) == 18
        assert len({c.split(" -n ")[1].split()[0] for c in cmds}) == 18  # distinct experiment names
        assert all(c.startswith("dvc exp run train_eval -n t2-") for c in cmds)

    def test_commands_set_existing_keys_and_land_on_their_variant(self):
        for v in VARIANTS:
            for cmd in commands(seeds=(2,)):
                if f"-n t2-{v.key}-" in cmd:
                    params = _params_for(cmd)
                    assert variant_of(params) == v.key
                    assert params["grpo"]["seed"] == 2

    def test_default_params_are_the_full_method(self):
        assert variant_of(PARAMS) == "full"

    def test_two_switches_at_once_are_no_variant(self):
        params = copy.deepcopy(PARAMS)
        _set(params, "grpo.crm.gate", False)
        _set(params, "grpo.crm.ccw", False)
        assert variant_of(params) is None


class TestCollect:
    def test_groups_by_params_and_seed(self):
        revs = []
        for cmd, reward in zip(commands(seeds=(0, 1)), range(12), strict=False):
            revs.append(_rev(cmd.split(" -n ")[1].split()[0], _params_for(cmd), float(reward)))
        got = collect(_exp_show(revs))
        assert set(got) == {v.key for v in VARIANTS}
        assert sorted(got["nodbs"]) == [0, 1]
        assert got["nodbs"][1]["after_grpo"]["reward"] == 3.0
        assert got["full"][0]["name"] in ("workspace", "t2-full-s0")  # base.seed 0 = grpo seed 0

    def test_an_experiment_wins_over_the_commits_older_metrics(self):
        """Bug: the baseline commit (listed before its experiments) carried the metrics of an older run, and
        that stale result became the full method's seed 0 and the SFT row instead of ``t2-full-s0``."""
        data = _exp_show([_rev("t2-full-s0", copy.deepcopy(PARAMS), 0.25, sft_reward=0.3)])
        data[1]["data"] = _rev("main", copy.deepcopy(PARAMS), 0.9, sft_reward=0.8)["data"]  # the commit's metrics
        got = collect(data)
        assert got["full"][0]["name"] == "t2-full-s0" and got["full"][0]["after_sft"]["reward"] == 0.3
        assert "| w/o RL (the SFT checkpoint every row starts from) | – | 0.300 |" in table(got)
        no_exp = collect(_exp_show([]))  # without experiments the workspace's own run still fills its row
        assert no_exp["full"][0]["name"] == "workspace"

    def test_a_running_experiment_is_not_a_result(self):
        """Bug: ``dvc exp show`` during ``dvc exp run`` lists the running experiment under its own name with
        the workspace's params and metrics (the previous experiment's results), counted as its seed."""
        running = _rev("t2-full-s1", _params_for(commands(seeds=(1,))[0]), 0.7)
        data = _exp_show([])
        data[1]["experiments"].insert(0, {"executor": {"state": "running", "name": "workspace"}, "revs": [running]})
        assert sorted(collect(data)["full"]) == [0]
        data[1]["experiments"][0]["executor"] = None  # finished
        assert sorted(collect(data)["full"]) == [0, 1]

    def test_name_is_not_trusted(self):
        params = _params_for(commands(seeds=(1,))[0])  # full, seed 1
        got = collect(_exp_show([_rev("t2-orm-s1", params, 2.0)]))
        assert 1 in got["full"] and "orm" not in got

    def test_experiments_with_other_settings_are_left_out(self):
        """A tuning run of the full method (another temperature) or one on other data is no seed of a row."""
        full = _params_for(commands(seeds=(1,))[0])
        hotter = _params_for(commands(seeds=(2,))[0] + " -S grpo.rollout.temperature=0.6")
        shorter = _params_for(commands(seeds=(3,))[0] + " -S synth.max_statements=1")
        got = collect(_exp_show([_rev("t2-full-s1", full, 1.0), _rev("g1", hotter, 2.0), _rev("e1", shorter, 3.0)]))
        assert sorted(got["full"]) == [0, 1] and got["full"][1]["after_grpo"]["reward"] == 1.0
        tuned = _exp_show([_rev("g1", hotter, 2.0)])
        tuned[1]["data"] = {"params": {"params.yaml": {"data": hotter}}}  # the commit itself runs hotter
        assert sorted(collect(tuned)["full"]) == [2]  # the workspace (seed 0) differs from the commit now

    def test_broken_or_partial_entries_are_skipped(self):
        bad = [{"rev": "b" * 40, "error": {"msg": "failed"}}, {"rev": "c" * 40, "data": {"metrics": {}}}]
        no_grpo = _rev("x", PARAMS, 1.0)
        no_grpo["data"]["metrics"]["metrics/train_eval.json"]["data"].pop("after_grpo")
        got = collect(json.dumps(_exp_show([*bad, no_grpo])))
        assert list(got) == ["full"] and list(got["full"]) == [0]


class TestTable:
    @staticmethod
    def _runs(rewards):
        return {
            s: {"after_grpo": {"reward": r, "answer_acc": 0.1, "rcs": 0.2, "fmt_rate": 0.6}, "after_sft": None}
            for s, r in enumerate(rewards)
        }

    def test_marks_only_differences_beyond_the_noise(self):
        text = table({"full": self._runs([1.0, 1.1, 0.9]), "nodbs": self._runs([0.5, 0.55, 0.45]),
                      "nogate": self._runs([0.9, 1.3, 0.7])})  # fmt: skip
        rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()}
        assert "(-0.500*)" in rows["w/o DBS (8 regular samples)"]
        assert "(-0.033)" in rows["w/o the gate (R_res paid without a full trace)"]  # within 2 SE: no mark
        assert rows["CodeThinker (DBS + CRM)"].count("*") == 0
        assert "1.000 ± 0.100" in rows["CodeThinker (DBS + CRM)"]
        assert "not run" in rows["w/o CCW (equal block weights)"]

    def test_equal_rows_get_no_mark(self):
        """Equal values with no seed noise: the float residue of the means (5e-17) is no difference."""
        text = table({"full": self._runs([0.2, 0.2, 0.2]), "nodbs": self._runs([0.2, 0.2])})
        rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()}
        assert "*" not in rows["w/o DBS (8 regular samples)"]

    def test_single_seed_gets_no_mark(self):
        text = table({"full": self._runs([1.0]), "orm": self._runs([0.0])})
        assert "*" not in text.replace("**", "")


class TestBaselineRewards:
    def test_commands_set_existing_keys_and_land_on_their_rows(self):
        cmds = commands(seeds=(1,), variants=BASELINES)
        assert cmds == [
            "dvc exp run train_eval -n t2-reward-orm-s1 -S grpo.seed=1 -S grpo.reward=orm",
            "dvc exp run train_eval -n t2-reward-whitebox-s1 -S grpo.seed=1 -S grpo.reward=whitebox",
        ]
        for v, cmd in zip(BASELINES, cmds, strict=True):
            assert variant_of(_params_for(cmd)) == v.key
        assert len(commands()) == 18  # Table 2's ablations alone, as before

    def test_the_orm_ablation_and_the_orm_baseline_are_different_rows(self):
        ablation = _params_for(commands(seeds=(0,))[4])  # -S grpo.crm.prm=false: CRM without R_proc
        assert "grpo.crm.prm=false" in commands(seeds=(0,))[4] and variant_of(ablation) == "orm"
        baseline = copy.deepcopy(ablation)
        _set(baseline, "grpo.reward", "orm")
        assert variant_of(baseline) == "reward-orm"  # the CRM switches do not apply to the baseline
        _set(baseline, "grpo.rollout.n_dbs", 0)
        _set(baseline, "grpo.rollout.n_regular", 8)
        assert variant_of(baseline) == "reward-orm"  # DBS samples are drawn regularly anyway: the same run
        _set(baseline, "grpo.rollout.n_regular", 4)
        assert variant_of(baseline) is None  # a smaller group is another budget

    def test_an_orm_run_lands_beside_crm_and_stale_metrics_are_skipped(self):
        orm_params = _params_for(commands(seeds=(1,), variants=BASELINES)[0])
        full_params = _params_for(commands(seeds=(1,))[0])
        revs = [
            _rev("t2-reward-orm-s1", orm_params, 1.2, acc=0.3, reward_kind="orm"),
            _rev("t2-full-s1", full_params, 2.5, acc=0.2, reward_kind="crm"),
            _rev("stale", _params_for(commands(seeds=(2,), variants=BASELINES)[0]), 9.0),  # CRM-scored metrics
        ]
        got = collect(_exp_show(revs))
        assert got["reward-orm"][1]["after_grpo"]["answer_acc"] == 0.3 and 2 not in got["reward-orm"]
        assert got["full"][1]["after_grpo"]["reward"] == 2.5
        assert "orm" not in got  # not the CRM ablation

    def test_baseline_rows_get_no_delta_on_their_own_reward_scale(self):
        def runs(reward, acc):
            return {
                s: {"after_grpo": {"reward": reward, "answer_acc": acc, "rcs": 0.0, "fmt_rate": 1.0}, "after_sft": None}
                for s, (reward, acc) in enumerate(zip(reward, acc, strict=True))
            }

        text = table({"full": runs([3.0, 3.2, 2.8], [0.5, 0.52, 0.48]), "reward-orm": runs([1.0, 1.1, 0.9], [0.2] * 3)})
        rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()}
        orm_row = rows[BASELINES[0].label]
        assert "1.000 ± 0.100 |" in orm_row  # its ORM reward, no Δ against CRM's
        assert "0.200 ± 0.000 (-0.300*)" in orm_row  # accuracy compares directly
        assert "not run" in rows[BASELINES[1].label]
        assert rows["outcome reward only (R_res)"].count("not run") == len(METRICS)  # the CRM ablation keeps its row
        assert orm_row.endswith("| – |")  # runs without train_eval's sampled pass: no sampled reward
