"""The stage runner (codethinker.ops.stage): one-line expected errors, declared metrics logged once, the paths
as the command's arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codethinker.errors import CodethinkerError
from codethinker.ops.dvcfile import declared, llm_params, marks, stage_argv
from codethinker.ops.stage import path, stage_args, stage_main, stage_run
from codethinker.params import ParamsError

ROOT = Path(__file__).resolve().parents[2]


class _Broken(CodethinkerError):
    exit_code = 7


def test_an_expected_error_is_one_line_and_its_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    @stage_main
    def main() -> None:
        raise _Broken("data/x.jsonl row 3: field 'code' is missing")

    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 7
    err = capsys.readouterr().err
    assert err == "test_stage: error: data/x.jsonl row 3: field 'code' is missing\n"


def test_params_errors_keep_their_builtin_base() -> None:
    assert issubclass(ParamsError, CodethinkerError) and issubclass(ParamsError, ValueError)
    assert ParamsError("x").exit_code == 2


def test_a_bug_keeps_its_traceback() -> None:
    @stage_main
    def main() -> None:
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        main()


def test_stage_process_exits_with_the_code_and_one_line(tmp_path: Path) -> None:
    """``python -m stages.<name>`` with a params file that does not resolve: one line on stderr, exit 2."""
    (tmp_path / "params.yaml").write_text("base: [not, a, mapping\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), CODETHINKER_TRACKING="off")
    cmd = [sys.executable, "-m", "stages.synth", *stage_argv("synth", ROOT)]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("synth: error: ") and "params.yaml" in lines[0], proc.stderr


ARGS = stage_args(
    "toy",
    "Stage toy: reads one file, writes two.\n\nMore text.",
    options={"model": "a key of toy.models"},
    data=path("the rows it reads (JSONL)"),
    out=path("the folder it writes"),
    parts=path("the pieces (JSONL)", many=True),
)


def test_stage_args_are_required_paths(capsys: pytest.CaptureFixture[str]) -> None:
    args = ARGS.parse(["--model", "m", "--data", "d/x.jsonl", "--out", "o", "--parts", "a.jsonl", "b.jsonl"])
    assert vars(args) == {
        "model": "m",
        "data": Path("d/x.jsonl"),
        "out": Path("o"),
        "parts": [Path("a.jsonl"), Path("b.jsonl")],
    }
    with pytest.raises(SystemExit) as info:
        ARGS.parse(["--model", "m", "--data", "d/x.jsonl", "--parts", "a"])
    assert info.value.code == 2 and "the following arguments are required: --out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ARGS.parse(["--model", "m", "--data", "d", "--out", "o", "--parts", "a", "--other", "x"])
    assert "unrecognized arguments: --other x" in capsys.readouterr().err


def test_a_path_another_stage_makes_must_exist(tmp_path: Path) -> None:
    args = stage_args("toy", None, truth=path("made first", made_by="truth_stage"), parts=path("p", many=True))
    (tmp_path / "t.json").write_text("{}")
    ok = args.parse(["--truth", str(tmp_path / "t.json"), "--parts", "a"])
    assert ok.truth == tmp_path / "t.json"
    with pytest.raises(SystemExit) as info:
        args.parse(["--truth", str(tmp_path / "none.json"), "--parts", "a"])
    assert str(info.value) == f"toy: {tmp_path / 'none.json'} is missing; run `dvc repro truth_stage` first"


@pytest.mark.parametrize(("stage", "first"), [("evaluate@base", "eval_truth"), ("generalize@base", "generalize_truth")])
def test_a_stage_run_before_its_truth_names_the_stage_to_run(stage: str, first: str, tmp_path: Path) -> None:
    """The evaluation stages stop before loading a model when their truth stage has not run."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), CODETHINKER_TRACKING="off")
    module = stage.split("@")[0]
    cmd = [sys.executable, "-m", f"stages.{module}", *stage_argv(stage, ROOT)]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().endswith(f"is missing; run `dvc repro {first}` first"), proc.stderr


def test_stage_help_lists_its_paths() -> None:
    text = ARGS.parser().format_help()
    usage = " ".join(text.split("\n\n")[0].split())
    assert usage == "usage: python -m stages.toy [-h] --model MODEL --data PATH --out PATH --parts PATH [PATH ...]"
    assert "Stage toy: reads one file, writes two." in text and "More text" not in text
    assert "--data PATH" in text and "the rows it reads (JSONL)" in text and "the pieces (JSONL)" in text


def test_a_stage_module_help_lists_the_paths_of_its_cmd() -> None:
    """``python -m stages.dedup --help``: every path argument with its help, no params.yaml needed."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), CODETHINKER_TRACKING="off")
    proc = subprocess.run(
        [sys.executable, "-m", "stages.dedup", "--help"], cwd="/", env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    for flag in stage_argv("dedup", ROOT)[::2]:
        assert flag in proc.stdout
    assert "exec_filter's samples (JSONL)" in proc.stdout


def test_stage_argv_is_the_cmd_after_the_module(tmp_path: Path) -> None:
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  a:\n    cmd: >-\n      python -m stages.a --in data/a b.jsonl\n      --out 'data/x y'\n"
        "  ev:\n    foreach: [m, n]\n    do:\n      cmd: python -m stages.ev --model ${key} --out data/${key}\n"
        "  sh:\n    cmd: ./run.sh\n"
    )
    assert stage_argv("a", tmp_path) == ["--in", "data/a", "b.jsonl", "--out", "data/x y"]
    assert stage_argv("ev@n", tmp_path) == ["--model", "n", "--out", "data/n"]
    for bad in ("sh", "nope"):
        with pytest.raises(ValueError, match=r"no `python -m <module> \.\.\.` cmd"):
            stage_argv(bad, tmp_path)


def test_the_run_ends_failed_on_an_expected_error(tracking_on: Path) -> None:
    from mlflow.tracking import MlflowClient

    @stage_main
    def main() -> None:
        with stage_run("boom", {"k": 1}):
            raise _Broken("no")

    with pytest.raises(SystemExit):
        main()
    client = MlflowClient(tracking_uri=f"sqlite:///{tracking_on / 'mlflow.db'}")
    exp = client.get_experiment_by_name("codethinker")
    runs = {r.data.tags["mlflow.runName"]: r for r in client.search_runs([exp.experiment_id])}
    assert runs["boom"].info.status == "FAILED"


def test_declared_metrics_are_logged_exactly_once(tracking_on: Path) -> None:
    from mlflow.tracking import MlflowClient

    root = tracking_on
    (root / "dvc.yaml").write_text(
        "stages:\n  s:\n    cmd: x\n    outs: [out/s.jsonl]\n    metrics: [{metrics/s.json: {cache: false}}]\n"
    )
    with stage_run("s", {"a": 1}) as run:
        (root / "out").mkdir()
        (root / "out/s.jsonl").write_text("{}\n")
        (root / "metrics").mkdir()
        (root / "metrics/s.json").write_text(json.dumps({"kept": 2, "dropped": {"short": 1}, "model": "m"}))
        run.log_metrics({"loss": 0.5}, step=1)  # a curve: what dvc.yaml cannot say
    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("codethinker")
    (child,) = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags["mlflow.runName"] == "s"]
    assert child.data.metrics == {"kept": 2, "dropped.short": 1, "loss": 0.5}
    for key in ("kept", "dropped.short"):
        assert len(client.get_metric_history(child.info.run_id, key)) == 1


def test_declared_reads_foreach_items_and_marks(tmp_path: Path) -> None:
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n"
        "  ev:\n    foreach: [a, b]\n    do:\n      cmd: x ${key}\n      meta: {gpu: true}\n"
        "      outs:\n        - data/${key}\n        - ${item.dep}\n"
        "      metrics:\n        - metrics/${key}:\n            cache: false\n"
        "  gen:\n    cmd: y\n    meta: {llm: gen.backend}\n"
    )
    d = declared("ev@b", tmp_path)
    assert d["outs"] == [str(tmp_path / "data/b")] and d["metrics"] == [str(tmp_path / "metrics/b")]
    assert d["plots"] == []
    assert marks("ev@a", tmp_path) == {"gpu": True}
    assert llm_params(marks("gen", tmp_path)) == ("gen.backend",)
    assert declared("nope", tmp_path) == {} and marks("nope", tmp_path) == {}


def test_report_reads_what_the_autolog_of_an_evaluate_stage_logged(tracking_on: Path) -> None:
    """The evaluate stage logs no metrics itself: the autolog of metrics/eval/<model>/ gives the report its keys."""
    from codethinker.data.io import write_json
    from codethinker.evaluation import report, report_sources
    from tests.evaluation.test_report import _metrics

    root = tracking_on
    (root / "dvc.yaml").write_text(
        "stages:\n  evaluate:\n    foreach: [grpo]\n    do:\n      cmd: x ${key}\n"
        "      metrics:\n        - metrics/eval/${key}:\n            cache: false\n"
    )
    m = _metrics("grpo", "cruxeval", 0.4)
    with stage_run("evaluate@grpo", {"config": m["config"], "model": {"format": "contra"}}) as run:
        run.set_tags({"eval.model": "grpo"})
        write_json(root / "metrics/eval/grpo/cruxeval.json", m)
    res = report.from_mlflow()["grpo"]
    got = res.benches["cruxeval"]
    for key in report_sources._MLFLOW_KEYS:
        if isinstance(m.get(key), int | float):
            assert got[key] == m[key], key
