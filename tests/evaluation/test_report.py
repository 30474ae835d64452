"""The report: tables from metrics files, DVC experiments and the exact ablation commands."""

from __future__ import annotations

import json

import pytest

from codethinker.cli import main
from codethinker.data.io import write_json
from codethinker.evaluation import report


def _metrics(model: str, bench: str, p: float, rcs: float | None = 0.5, tokens: float = 30.0) -> dict:
    return {
        "benchmark": bench,
        "display": bench,
        "model": {"name": model, "format": "contra"},
        "config": {"runs": 5, "seed": 0, "temperature": 0.2, "max_tokens": 32},
        "n_samples": 800,
        "untraceable": 0,
        "runs": 5,
        "pass1_mean": p,
        "pass1_std": 0.01,
        "pass1_strict_mean": p / 2,
        "rcs_mean": rcs,
        "fmt_rate": 0.25,
        "tokens_mean": tokens,
    }


@pytest.fixture()
def metrics_dir(tmp_path):
    root = tmp_path / "metrics" / "eval"
    for model, p in (("base", 0.10), ("sft", 0.20), ("grpo", 0.30)):
        write_json(root / model / "cruxeval.json", _metrics(model, "cruxeval", p))
        write_json(root / model / "reval.json", _metrics(model, "reval", p + 0.1, tokens=40.0))
        write_json(
            root / model / "livecodebench.json",
            {"benchmark": "livecodebench", "model": {"name": model}, "skipped": "LCB-O skipped: offline"},
        )
    return root


def test_tables_from_metrics(metrics_dir):
    results = report.from_metrics_dir(metrics_dir)
    assert list(results) == ["base", "grpo", "sft"]
    text = report.render_report(results)
    assert "| GRPO (DBS + CRM) | 30.00 ± 1.00 | skipped | 40.00 ± 1.00 | 35.00 (2/3) |" in text
    assert "*82.57*" in text and "(paper)" in text
    assert "| w/o RL (the SFT model) | 20.00 ± 1.00 | skipped | 30.00 ± 1.00 | 25.00 (2/3) | -10.00 | *-9.89* |" in text
    assert "| w/o DBS (8 regular samples) | not run |" in text
    assert "| SFT (ConTra) | CRUXEval-O 50.00, REval-FO 50.00 | 50.00 | *–* | CRUXEval-O 30, REval-FO 40 | 35 |" in text
    assert "*14.62*" in text and "*1118*" in text
    assert "| LCB-O | 0 | – | 479 | LCB-O skipped: offline |" in text
    assert "Settings: 5 runs (seeds 0..4), temperature 0.2, max_tokens 32" in text


def test_ablation_commands_spell_new_keys_with_plus():
    cmds = report.ablation_commands({"grpo": {"rollout": {"n_dbs": 4, "n_regular": 4}, "crm": {"prm": True}}})
    assert cmds["wo-dbs"] == "dvc exp run -n wo-dbs -S 'grpo.rollout.n_dbs=0' -S 'grpo.rollout.n_regular=8'"
    assert cmds["wo-dbs-prm"].endswith("-S 'grpo.crm.prm=false'")
    assert cmds["wo-dbs-ccw"].endswith("-S '+grpo.crm.ccw=false'")
    assert set(cmds) == {"wo-dbs", "wo-dbs-prm", "wo-dbs-rcc", "wo-dbs-orm", "wo-dbs-ccw"}


def test_dvc_exps_fill_table2(metrics_dir):
    def rev(name, p):
        return {
            "rev": "abc1234",
            "name": name,
            "data": {
                "metrics": {
                    f"metrics/eval/grpo/{b}.json": {"data": _metrics("grpo", b, p)} for b in ("cruxeval", "reval")
                }
            },
        }

    shown = [
        {"rev": "workspace", "data": rev("workspace", 0.30)["data"], "experiments": None},
        {
            "rev": "abc1234",
            "name": "main",
            "data": {"metrics": {}},
            "experiments": [{"name": "wo-dbs", "revs": [rev("wo-dbs", 0.28)]}],
        },
    ]
    exps = report.from_dvc_exps(json.dumps(shown))
    assert set(exps) == {"workspace", "wo-dbs"}
    text = report.table2(exps, report.ablation_commands())
    assert "| w/o DBS (8 regular samples) | 28.00 ± 1.00 | – | 28.00 ± 1.00 | 28.00 (2/3) | -2.00 | *-1.09* |" in text


def test_report_cli(metrics_dir, tmp_path, capsys):
    out = tmp_path / "results.md"
    assert main(["report", "--metrics-dir", str(metrics_dir), "--out", str(out)]) == 0
    assert out.read_text().startswith("# Results")
    assert main(["report", "--metrics-dir", str(tmp_path / "none")]) == 2
    assert "codethinker: error: no metrics folder" in capsys.readouterr().err
    assert main(["report", "--metrics-dir", str(metrics_dir), "--exps", str(tmp_path / "x.json")]) == 2


@pytest.mark.slow
def test_report_from_mlflow(tmp_path, monkeypatch):
    """A stage-style run (tags eval.model, metrics <bench>.<key>) read back into Table 1."""
    from codethinker.ops.runs import stage_run

    monkeypatch.setenv("CODETHINKER_TRACKING", "on")
    monkeypatch.setenv("CODETHINKER_TRACKING_AUTOLOG", "off")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("CODETHINKER_EXPERIMENT", "report-test")
    monkeypatch.chdir(tmp_path)
    m = _metrics("grpo", "cruxeval", 0.4)
    with stage_run("evaluate@grpo", {"config": m["config"], "model": {"format": "contra"}}) as run:
        run.set_tags({"eval.model": "grpo", "livecodebench.skipped": "offline"})
        run.log_metrics({f"cruxeval.{k}": v for k, v in m.items() if isinstance(v, int | float)})
    results = report.from_mlflow()
    assert list(results) == ["grpo"]
    res = results["grpo"]
    assert res.benches["cruxeval"]["pass1_mean"] == 0.4 and res.benches["livecodebench"]["skipped"] == "offline"
    text = report.render_report(results)
    assert "| GRPO (DBS + CRM) | 40.00 ± 1.00 | skipped | – | 40.00 (1/3) |" in text
    assert "Settings: 5 runs (seeds 0..4)" in text


def test_one_run_shows_its_pass1_without_a_spread():
    """A single run has no std: the cell is the score alone, not "± 0.00"."""
    one = _metrics("sft", "cruxeval", 0.25) | {"runs": 1, "pass1_std": 0.0}
    assert report._cell(one) == "25.00"
    assert report._cell(_metrics("sft", "cruxeval", 0.25)) == "25.00 ± 1.00"
