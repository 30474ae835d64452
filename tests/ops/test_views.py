"""The headline metrics and plot tables a stage's reports give DVC (codethinker.ops.views, ops.headline), and the
detail reports ``codethinker report --exps`` gets back from experiment commits (ops.dvc_api.with_detail)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codethinker.ops.dvc_api import with_detail
from codethinker.ops.headline import HEADLINE, headline, parent_metrics
from codethinker.ops.runs import stage_run
from codethinker.ops.views import detail_paths, read_detail, write_views

ROOT = Path(__file__).resolve().parents[2]
DVC = Path(sys.executable).parent / "dvc"
DATA_STAGES = ("fetch", "ast_filter", "gen_inputs", "synth", "exec_filter", "dedup", "crpl_data")


def _stages() -> list[str]:
    out = []
    for name in HEADLINE:
        out += [f"{name}@{k}" for k in ("base", "sft", "grpo")] if name in ("evaluate", "generalize") else [name]
    return out


class TestHeadline:
    @pytest.mark.parametrize("stage", _stages())
    def test_every_stage_has_a_headline_from_its_committed_report(self, stage):
        """A stage whose report keys were renamed would silently lose its headline: each one reads the
        committed reports to a non-empty set of numbers."""
        numbers = headline(stage, read_detail(detail_paths(stage, ROOT)))
        assert numbers, f"{stage}: no headline from {detail_paths(stage, ROOT)}"
        assert all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers.values())

    @pytest.mark.parametrize("stage", DATA_STAGES)
    def test_a_data_stage_drops_what_it_does_not_keep(self, stage):
        h = headline(stage, read_detail(detail_paths(stage, ROOT)))
        assert h["in"] - h["kept"] == h["dropped"] >= 0

    def test_keys_absent_from_a_report_are_left_out(self):
        assert headline("sft", {"first_loss": 2.0}) == {"loss_first": 2.0}
        assert headline("no_such_stage", {"x": 1}) == {}
        assert headline("grpo", {"reward_first": True, "reward_last": "n/a"}) == {}  # no bools, no strings

    def test_the_parent_run_names_group_by_stage(self):
        assert parent_metrics("evaluate@sft", {"cruxeval": 0.5}) == {"eval/sft/cruxeval": 0.5}
        assert parent_metrics("dedup", {"kept": 3}) == {"data/dedup/kept": 3}

    def test_generalize_averages_pass1_per_group_of_benchmarks_that_ran(self):
        detail = {
            "mbpp": {"group": "codegen", "pass1": 0.5},
            "humaneval": {"group": "codegen", "pass1": 0.25},
            "cruxeval-x-go": {"skipped": "runtime missing: go"},
        }
        assert headline("generalize@sft", detail) == {"codegen_pass1": 0.375, "benchmarks": 2}


def _project(tmp_path: Path) -> Path:
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n"
        "  ast_filter:\n    cmd: python -m stages.ast_filter\n"
        "    outs:\n      - metrics/ast_filter.json:\n          cache: false\n      - metrics/funnel.json\n"
        "    metrics:\n      - metrics/headline/ast_filter.json:\n          cache: false\n"
        "    plots:\n      - plots/funnel.csv:\n          cache: false\n"
    )
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics/ast_filter.json").write_text(
        json.dumps({"problems": 10, "functions": 7, "dropped": {"too_short": 3}})
    )
    steps = [{"step": "0 source", "count": 10, "unit": "problems", "paper": None}]
    (tmp_path / "metrics/funnel.json").write_text(json.dumps({"default": {"steps": steps}}))
    return tmp_path


class TestWriteViews:
    def test_the_headline_and_the_plot_table_come_from_the_reports(self, tmp_path):
        root = _project(tmp_path)
        written = write_views("ast_filter", root)
        assert sorted(p.name for p in written) == ["ast_filter.json", "funnel.csv"]
        h = json.loads((root / "metrics/headline/ast_filter.json").read_text())
        assert h == {"in": 10, "kept": 7, "dropped": 3}
        assert (root / "plots/funnel.csv").read_text() == "step,count,unit,paper\n1. source,10,problems,\n"

    def test_a_stage_without_a_dvc_entry_writes_nothing(self, tmp_path):
        assert write_views("nothing_here", _project(tmp_path)) == []

    def test_the_stage_runner_writes_them_on_a_normal_exit_only(self, tmp_path, monkeypatch):
        root = _project(tmp_path)
        monkeypatch.setenv("CODETHINKER_TRACKING", "off")
        with pytest.raises(RuntimeError), stage_run("ast_filter", root=str(root)):
            raise RuntimeError("the stage failed")
        assert not (root / "metrics/headline").exists()
        with stage_run("ast_filter", root=str(root)):
            pass
        assert json.loads((root / "metrics/headline/ast_filter.json").read_text())["kept"] == 7


def _git(root: Path, *args: str) -> str:
    env = dict(
        os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"
    )
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env).stdout


class TestWithDetail:
    def test_each_rev_gets_its_reports_from_its_commit_and_the_workspace_from_disk(self, tmp_path):
        root = tmp_path
        _git(root, "init", "-q")
        (root / "metrics/eval/sft").mkdir(parents=True)
        (root / "metrics/headline").mkdir()
        (root / "metrics/train_eval.json").write_text('{"reward": 1}')
        (root / "metrics/eval/sft/cruxeval.json").write_text('{"pass1_mean": 0.5}')
        (root / "metrics/headline/train_eval.json").write_text('{"r": 1}')
        _git(root, "add", ".")
        _git(root, "commit", "-qm", "run")
        sha = _git(root, "rev-parse", "HEAD").strip()
        (root / "metrics/train_eval.json").write_text('{"reward": 2}')  # the workspace moved on
        listed = {"metrics/headline/train_eval.json": {"data": {"r": 1}}}
        shown = [
            {"rev": "workspace", "data": {"metrics": dict(listed)}},
            {"rev": sha, "data": None, "experiments": [{"revs": [{"rev": sha, "name": "exp-a", "data": {}}]}]},
        ]
        out = with_detail(shown, root)
        ws, base, exp = out[0]["data"]["metrics"], out[1]["data"]["metrics"], out[1]["experiments"][0]["revs"][0]
        assert ws["metrics/train_eval.json"] == {"data": {"reward": 2}}
        assert base["metrics/train_eval.json"] == {"data": {"reward": 1}}
        assert base["metrics/eval/sft/cruxeval.json"] == {"data": {"pass1_mean": 0.5}}
        assert "metrics/headline/train_eval.json" not in base  # DVC's own listing, not added twice
        assert exp["data"]["metrics"]["metrics/train_eval.json"] == {"data": {"reward": 1}}

    def test_an_unknown_commit_adds_nothing(self, tmp_path):
        _git(tmp_path, "init", "-q")
        shown = [{"rev": "0" * 40, "data": {"metrics": {}}}]
        assert with_detail(shown, tmp_path)[0]["data"]["metrics"] == {}


@pytest.mark.skipif(not DVC.exists(), reason="dvc is not installed in this venv")
def test_dvc_metrics_show_lists_the_headlines_only_in_a_short_table():
    """The committed run: every headline file, no detail report, no load warning, a table a screen can hold."""
    res = subprocess.run(
        [str(DVC), "metrics", "show"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, DVC_NO_ANALYTICS="1"),
    )
    lines = (res.stdout + res.stderr).splitlines()
    assert res.returncode == 0 and not any("failed to load" in ln for ln in lines)
    paths = {ln.split()[0] for ln in lines[1:] if ln.strip()}
    assert paths and all(p.startswith("metrics/headline/") for p in paths)
    assert len(lines) < 200 and max(map(len, lines)) < 1500


def test_a_report_declared_as_metrics_is_never_replaced_by_a_headline(tmp_path, monkeypatch):
    """A project whose stage declares its own report under ``metrics:`` (not ``metrics/headline/``), run from
    its folder with the runner's relative root: the report stays what the stage wrote."""
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  sft:\n    cmd: x\n    metrics: [{metrics/sft.json: {cache: false}}]\n"
    )
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics/sft.json").write_text('{"first_loss": 2.0, "last_loss": 1.0}')
    monkeypatch.chdir(tmp_path)
    assert write_views("sft", ".") == []
    assert json.loads((tmp_path / "metrics/sft.json").read_text()) == {"first_loss": 2.0, "last_loss": 1.0}
