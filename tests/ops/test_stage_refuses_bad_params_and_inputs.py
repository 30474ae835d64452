"""A stage given a bad params.yaml (a section given twice, a misspelled section, a number out of its bounds) or an
empty input stops before it writes: one line on stderr naming the file and the key, exit 2, its previous outputs
byte for byte as they were. Run as ``dvc repro`` runs it: ``python -m stages.ast_filter`` in a working folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARAMS = (ROOT / "params.yaml").read_text()
PROBLEM = {
    "task_id": "add-one",
    "entry_point": "Solution().addOne",
    "preamble": "",
    "completion": "class Solution:\n    def addOne(self, x: int) -> int:\n        return x + 1\n",
    "input_output": [{"input": "x = 1", "output": "2"}],
}


def _line_of(text: str, needle: str) -> int:
    return text.splitlines().index(needle) + 1


def _run_stage(tmp_path: Path, params: str, problems: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    (tmp_path / "params.yaml").write_text(params)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "problems.jsonl").write_text(problems)
    out = tmp_path / "out"
    out.mkdir()
    before = {"functions.jsonl": b'{"previous": "run"}\n', "metrics.json": b'{"functions": 1472}\n'}
    for name, data in before.items():
        (out / name).write_bytes(data)
    cmd = [sys.executable, "-m", "stages.ast_filter"]
    cmd += ["--problems", "in/problems.jsonl", "--out", "out/functions.jsonl", "--metrics", "out/metrics.json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), CODETHINKER_TRACKING="off")
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    return proc, before


def _refused(tmp_path: Path, params: str, problems: str, line: str) -> None:
    proc, before = _run_stage(tmp_path, params, problems)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"ast_filter: error: {line}"], proc.stderr
    out = tmp_path / "out"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing written, no temp file left


ONE_PROBLEM = json.dumps(PROBLEM) + "\n"
DUPLICATE = PARAMS + "ast_filter:\n  min_lines: 40\n"


@pytest.mark.parametrize(
    ("params", "line"),
    [
        (
            DUPLICATE,
            f"params.yaml: ast_filter: duplicated key at lines {_line_of(PARAMS, 'ast_filter:')} and "
            f"{len(PARAMS.splitlines()) + 1} (YAML would keep the last one silently)",
        ),
        (PARAMS + "ast_filtr:\n  min_lines: 3\n", "params.yaml: ast_filtr: unknown section (did you mean ast_filter?)"),
        (
            PARAMS.replace("  min_lines: 5 ", "  min_lines: -3 "),
            "params.yaml: ast_filter.min_lines: must be >= 0, got -3",
        ),
        (
            PARAMS.replace("  min_lines: 5 ", "  min_line: 5 "),
            "params.yaml: ast_filter.min_line: unknown key (ast_filter has: min_lines); did you mean min_lines?",
        ),
    ],
    ids=["duplicated-section", "misspelled-section", "negative-min-lines", "misspelled-key"],
)
def test_a_bad_params_file_stops_the_stage_before_it_writes(tmp_path, params, line):
    assert params != PARAMS
    _refused(tmp_path, params, ONE_PROBLEM, line)


@pytest.mark.parametrize("problems", ["", "\n\n"], ids=["empty", "blank-lines"])
def test_an_empty_input_stops_the_stage_before_it_writes(tmp_path, problems):
    line = "in/problems.jsonl: empty input (no rows): nothing written, the outputs are left as they were"
    _refused(tmp_path, PARAMS, problems, line)


def test_the_same_folder_with_good_params_and_input_runs(tmp_path):
    """The control: the stage runs and replaces its outputs when nothing is wrong."""
    proc, before = _run_stage(tmp_path, PARAMS, ONE_PROBLEM)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    assert json.loads((out / "metrics.json").read_text())["problems"] == 1
    assert (out / "functions.jsonl").read_bytes() != before["functions.jsonl"]


# --- through DVC: the metrics and plots a stage committed survive its failure ------------------------


def test_every_metrics_and_plots_file_of_the_pipeline_is_kept_when_its_stage_fails():
    import yaml

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    loose = []
    for name, stage in stages.items():
        stage = stage.get("do", stage)
        for kind in ("outs", "metrics", "plots"):
            for entry in stage.get(kind) or []:
                path, opts = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
                if str(path).startswith(("metrics/", "plots/")) and not (opts or {}).get("persist"):
                    loose.append(f"{name}: {path}")
    assert not loose, f"DVC removes these before the stage runs, so a failing stage loses them: {loose}"


@pytest.mark.skipif(not (Path(sys.executable).parent / "dvc").exists(), reason="dvc is not installed in this venv")
def test_dvc_repro_of_a_stage_stopped_by_a_misspelled_key_leaves_its_committed_metrics(tmp_path):
    """The real path: a stage whose params.yaml has a slip, run by ``dvc repro``; its committed metrics and
    plot (``persist: true``) are as they were; its cached output comes back with ``dvc checkout``."""
    dvc = str(Path(sys.executable).parent / "dvc")
    env = dict(os.environ, PYTHONPATH=str(ROOT), CODETHINKER_TRACKING="off", DVC_NO_ANALYTICS="1")
    run = lambda *a: subprocess.run(a, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)  # noqa: E731
    assert run("git", "init", "-q").returncode == 0 and run(dvc, "init", "-q").returncode == 0
    (tmp_path / "params.yaml").write_text(PARAMS)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "problems.jsonl").write_text(ONE_PROBLEM)
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  ast_filter:\n"
        f"    cmd: {sys.executable} -m stages.ast_filter --problems in/problems.jsonl --out out/functions.jsonl"
        " --metrics metrics/ast_filter.json\n"
        "    deps: [in/problems.jsonl]\n    params: [ast_filter]\n    outs: [out/functions.jsonl]\n"
        "    metrics:\n      - metrics/ast_filter.json:\n          cache: false\n          persist: true\n"
    )
    first = run(dvc, "repro", "-q")
    assert first.returncode == 0, first.stderr
    committed = (tmp_path / "metrics" / "ast_filter.json").read_bytes()
    (tmp_path / "params.yaml").write_text(PARAMS.replace("  min_lines: 5", "  min_line: 4", 1))
    second = run(dvc, "repro", "-q")
    assert second.returncode != 0 and "ast_filter.min_line: unknown key" in second.stderr + second.stdout
    assert "did you mean min_lines?" in second.stderr + second.stdout
    assert (tmp_path / "metrics" / "ast_filter.json").read_bytes() == committed  # persist: kept
    assert not (tmp_path / "out" / "functions.jsonl").exists()  # removed by DVC before the command ran ...
    (tmp_path / "params.yaml").write_text(PARAMS)
    assert run(dvc, "checkout", "out/functions.jsonl").returncode == 0  # ... and back from DVC's cache
    assert (tmp_path / "out" / "functions.jsonl").exists()
