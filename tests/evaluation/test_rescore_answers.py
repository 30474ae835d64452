"""scripts/rescore_answers.py: stored answers re-scored through the task contract, and the first broken rule counted."""

from __future__ import annotations

import doctest
import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from codethinker.contra.render import render_trace
from codethinker.contra.tracer import Flow
from codethinker.rewards.crm import crm_score
from tests.training.tinydata import truths, write_grpo_parquet

_spec = importlib.util.spec_from_file_location(
    "rescore_answers", Path(__file__).resolve().parents[2] / "scripts" / "rescore_answers.py"
)
rescore_answers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rescore_answers)


def _answers(tmp_path: Path, texts: list[str], stored: list[dict] | None = None) -> tuple[Path, Path]:
    """A held-out parquet of the tiny truths and an answers file: one greedy answer per truth, parts as scored."""
    data = write_grpo_parquet(tmp_path / "eval.parquet")
    flows = [Flow.from_json(t) for t in truths()]
    rows = []
    for i, (text, flow) in enumerate(zip(texts, flows, strict=False)):
        s = crm_score(text, flow)
        parts = {k: s[k] for k in rescore_answers.PARTS} | ((stored or [{}] * len(texts))[i])
        key = {"model": "after_sft", "pass": "greedy", "id": f"p{i}/0", "set": "s", "k": 0}
        rows.append({**key, "text": text, **parts})
    path = tmp_path / "answers.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    return path, data


def _texts() -> list[str]:
    """A valid trace, one with its second code line miscopied, one whose RETURN calls another input."""
    flows = [Flow.from_json(t) for t in truths()]
    good, miscopy, wrong_call = (render_trace(f) for f in flows[:3])
    miscopy = miscopy.replace("total += n", "total -= n")
    wrong_call = wrong_call.replace("f('abc')", "f('abd')")
    assert miscopy != render_trace(flows[1]) and wrong_call != render_trace(flows[2])
    return [good, miscopy, wrong_call]


class TestReasons:
    def test_counts_the_first_broken_rule_per_model_pass_and_set(self, tmp_path, capsys):
        answers, data = _answers(tmp_path, _texts())
        assert rescore_answers.main(["--answers", str(answers), "--data", str(data), "--reasons"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith("3 answers re-scored") and out[0].endswith("answer_ok 0")
        assert out[1:] == ["after_sft greedy s (3): valid 1, code 1, return 1"]

    def test_without_the_flag_only_the_comparison_is_printed(self, tmp_path, capsys):
        answers, data = _answers(tmp_path, _texts())
        assert rescore_answers.main(["--answers", str(answers), "--data", str(data)]) == 0
        assert len(capsys.readouterr().out.splitlines()) == 1

    def test_an_invalid_score_without_a_reason_is_not_counted_valid(self):
        a = [{"model": "m", "pass": "greedy", "set": "s"}] * 2
        scores = [{"fmt": 0, "reason": None}, {"fmt": 1, "reason": None}]
        assert rescore_answers.reasons(a, scores) == "m greedy s (2): valid 1, invalid 1"

    def test_doctest(self):
        assert doctest.testmod(rescore_answers).failed == 0


class TestRescore:
    def test_a_stored_part_that_the_reward_does_not_give_is_counted_and_exits_1(self, tmp_path, capsys):
        texts = _texts()
        answers, data = _answers(tmp_path, texts, stored=[{"reward": 4.0}, {}, {}])  # the valid trace's 4.0 stays
        assert rescore_answers.main(["--answers", str(answers), "--data", str(data)]) == 0
        answers, data = _answers(tmp_path, texts, stored=[{}, {"reward": 4.0, "fmt": 1}, {}])  # a forged pass
        assert rescore_answers.main(["--answers", str(answers), "--data", str(data)]) == 1
        assert "fmt 1, r_proc 0, r_res 0, reward 1" in capsys.readouterr().out

    @pytest.mark.parametrize("text", ["", "[TRACE]\n", "x" * 5000])
    def test_hostile_answers_are_counted_not_raised(self, tmp_path, capsys, text):
        answers, data = _answers(tmp_path, [text])
        assert rescore_answers.main(["--answers", str(answers), "--data", str(data), "--reasons"]) == 0
        line = capsys.readouterr().out.splitlines()[1]
        assert line.startswith("after_sft greedy s (1): valid 0, ")


class TestBadInput:
    """One line naming the file, row and field, exit 2: nothing is scored from a row it cannot read."""

    def _rewrite(self, path: Path, row: int, change) -> None:
        with gzip.open(path, "rt") as fh:
            rows = [json.loads(line) for line in fh]
        change(rows[row - 1])
        with gzip.open(path, "wt") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)

    @pytest.mark.parametrize(
        ("change", "field"),
        [
            (lambda r: r.pop("text"), "text"),
            (lambda r: r.update(reward="4"), "reward"),
            (lambda r: r.update(id=None), "id"),
            (lambda r: r.update(id="nowhere/0"), "id"),  # an answer to no held-out row
        ],
    )
    def test_a_bad_row_is_named_with_its_field(self, tmp_path, capsys, change, field):
        answers, data = _answers(tmp_path, _texts())
        self._rewrite(answers, 2, change)
        assert rescore_answers.main(["--answers", str(answers), "--data", str(data)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"{answers}, row 2, field '{field}': ")

    def test_a_line_that_is_not_json(self, tmp_path, capsys):
        answers, data = _answers(tmp_path, _texts())
        with gzip.open(answers, "at") as fh:
            fh.write("{not json\n")
        assert rescore_answers.main(["--answers", str(answers), "--data", str(data)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"{answers}, row 4")

    def test_a_missing_file(self, tmp_path, capsys):
        _, data = _answers(tmp_path, _texts())
        missing = tmp_path / "none.jsonl.gz"
        assert rescore_answers.main(["--answers", str(missing), "--data", str(data)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(str(missing))
