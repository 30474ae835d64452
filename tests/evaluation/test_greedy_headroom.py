"""scripts/greedy_headroom.py: the prompts a sampled answer beats the greedy one on, and a greedy change split."""

from __future__ import annotations

import doctest
import gzip
import importlib.util
import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

_spec = importlib.util.spec_from_file_location(
    "greedy_headroom", Path(__file__).resolve().parents[2] / "scripts" / "greedy_headroom.py"
)
greedy_headroom = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(greedy_headroom)


def _answer(model: str, pss: str, i: int, reward: float, kind: str = "shape_disjoint") -> dict:
    return {"model": model, "pass": pss, "id": f"p{i}", "set": kind, "reward": reward, "text": "..."}


def _write(tmp_path: Path, answers: list[dict]) -> Path:
    path = tmp_path / "answers.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.writelines(json.dumps(a) + "\n" for a in answers)
    return path


class TestHeadroom:
    def test_doctest(self):
        assert doctest.testmod(greedy_headroom).failed == 0

    def test_counts_beaten_prompts_and_splits_the_change(self, tmp_path, capsys):
        answers = [
            # p0: greedy 0, a sample 4 (beaten); GRPO's greedy 4
            _answer("after_sft", "greedy", 0, 0.0),
            _answer("after_sft", "sampled", 0, 0.0),
            _answer("after_sft", "sampled", 0, 4.0),
            _answer("after_grpo", "greedy", 0, 4.0),
            # p1: greedy 4 as good as every sample; GRPO's greedy 0.5
            _answer("after_sft", "greedy", 1, 4.0),
            _answer("after_sft", "sampled", 1, 4.0),
            _answer("after_grpo", "greedy", 1, 0.5),
            # p2: greedy 1, samples 0.4 and 2 (beaten); GRPO the same
            _answer("after_sft", "greedy", 2, 1.0),
            _answer("after_sft", "sampled", 2, 0.4),
            _answer("after_sft", "sampled", 2, 2.0),
            _answer("after_grpo", "greedy", 2, 1.0),
            _answer("before_sft", "greedy", 0, 0.0),  # no sampled pass: ignored
            _answer("after_grpo", "sampled", 1, 4.0),  # GRPO's samples are not the base's
        ]
        row = greedy_headroom.headroom(answers)["shape_disjoint"]
        assert row == {
            "n": 3,
            "beaten": 2,
            "best_of_k": (4.0 + 1.0) / 3,
            "up": 1,
            "up_beaten": 1,
            "down": 1,
            "down_beaten": 0,
            "diff_beaten": 4.0 / 3,
            "diff_rest": -3.5 / 3,
        }
        assert greedy_headroom.main(["--answers", str(_write(tmp_path, answers))]) == 0
        out = capsys.readouterr().out
        assert out.startswith("shape_disjoint: 3 prompts, beaten 2, best-of-k +1.667 | after_grpo: up 1 (1 beaten)")

    def test_without_grpo_only_the_headroom(self):
        answers = [_answer("after_sft", "greedy", 0, 0.0), _answer("after_sft", "sampled", 0, 0.3)]
        assert greedy_headroom.headroom(answers) == {"shape_disjoint": {"n": 1, "beaten": 1, "best_of_k": 0.3}}

    def test_no_sampled_pass_is_exit_2_with_one_line(self, tmp_path, capsys):
        path = _write(tmp_path, [_answer("after_sft", "greedy", 0, 1.0)])
        assert greedy_headroom.main(["--answers", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(path) in err[0] and "after_sft" in err[0]

    @given(
        st.lists(
            st.tuples(st.floats(0, 4), st.lists(st.floats(0, 4), min_size=1, max_size=4), st.floats(0, 4)),
            min_size=1,
            max_size=30,
        )
    )
    def test_the_split_adds_up_to_the_mean_change(self, prompts):
        answers = []
        for i, (g, samples, new) in enumerate(prompts):
            answers += [_answer("after_sft", "greedy", i, g), _answer("after_grpo", "greedy", i, new)]
            answers += [_answer("after_sft", "sampled", i, s) for s in samples]
        row = greedy_headroom.headroom(answers)["shape_disjoint"]
        mean_change = sum(new - g for g, _, new in prompts) / len(prompts)
        assert abs(row["diff_beaten"] + row["diff_rest"] - mean_change) < 1e-9
        assert row["best_of_k"] >= 0 and row["beaten"] <= row["n"] == len(prompts)
        assert row["up_beaten"] <= row["up"] and row["down_beaten"] <= row["down"]

    def test_a_bad_row_is_one_line_naming_file_row_and_key(self, tmp_path, capsys):
        good = _answer("after_sft", "greedy", 0, 1.0)
        for bad, says in (
            ({k: v for k, v in good.items() if k != "reward"}, "row 2, field 'reward': missing field"),
            ("{", "row 2: not valid JSON"),
        ):
            path = tmp_path / "answers.jsonl.gz"
            with gzip.open(path, "wt") as fh:
                fh.write(json.dumps(good) + "\n" + (bad if isinstance(bad, str) else json.dumps(bad)) + "\n")
            assert greedy_headroom.main(["--answers", str(path)]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith(str(path)) and says in err[0]
