"""codegen.crpl / crpl_edits: CRPL's clean-ups and degradations on known texts, the three pair types, the
determinism and the held-out split by problem (a judge stub, then real LeetCodeDataset responses through the
sandbox judge), the llm backend's parsing, and a short real training of the reward model."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from codethinker.codegen.crpl import PAIR_TYPES, RECODE_ASK, build_pairs, recode_prompt, split_pairs
from codethinker.codegen.crpl_bugs import bug_candidates
from codethinker.codegen.crpl_edits import (
    Context,
    Reasoning,
    drop_filler,
    examples,
    parse_recode,
    parse_response,
    shuffle_steps,
    skip_step,
    verify_examples,
    wrong_complexity,
    wrong_example,
)
from codethinker.codegen.crpl_llm import llm_teacher
from codethinker.codegen.judge import JudgeLimits, Judgement
from codethinker.codegen.task import ASK, CodegenProblem

CODE = "class Solution:\n    def add(self, x: int) -> int:\n        return x + 1\n"
RESPONSE = (
    "Sure! To solve this we add one.\n\n1. Read x.\n2. Add 1 to x.\n3. Return the sum.\n\n"
    f"Here's the complete code:\n\n```python\n{CODE}```\n\nThis runs in O(1) time."
)
CTX = Context((("x = 1", "2"),))


def problem(i: int, split: str = "train") -> CodegenProblem:
    return CodegenProblem(
        f"add-{i}", i, "Easy", "v0.2.0", f"Add one.\n\n{ASK}", "", CODE, "Solution().add",
        ("assert candidate(x = 1) == 2", "assert candidate(x = -1) == 0"), split,
    )  # fmt: skip


def stub_judge(problems, codes):
    """Passes exactly the reference program."""
    return [
        Judgement("pass" if c == p.reference else "fail", (), len(p.tests))
        for p, c in zip(problems, codes, strict=True)
    ]


class TestEdits:
    def test_parse(self):
        r = parse_response(RESPONSE, "Solution().add")
        assert r is not None and r.code == CODE
        assert r.think.startswith("Sure! To solve") and r.think.endswith("This runs in O(1) time.")
        assert parse_recode(r.render()) == Reasoning(r.think.strip(), CODE)
        assert parse_response("no code here", "Solution().add") is None
        assert examples(("assert candidate(x = 1) == 2", "assert f(1)", "assert candidate([1]) == [2]")) == (
            ("x=1", "2"),
            ("[1]", "[2]"),
        )

    def test_cleanups(self):
        r = parse_response(RESPONSE, "Solution().add")
        assert r is not None
        clean = drop_filler(r, CTX, random.Random(0))
        assert clean is not None and clean.think.startswith("To solve this we add one.")
        assert "Here's the complete code" not in clean.think
        checked = verify_examples(r, CTX, random.Random(0))
        assert checked is not None and checked.think.endswith(
            "Checking the examples:\n- `x = 1` gives `2`, as expected."
        )

    def test_degradations(self):
        r = parse_response(RESPONSE, "Solution().add")
        assert r is not None
        skipped = skip_step(r, CTX, random.Random(0))
        assert skipped is not None and skipped.think.count("\n2. ") == 1 and "\n3. " not in skipped.think
        shuffled = shuffle_steps(r, CTX, random.Random(0))
        assert shuffled is not None and shuffled.think != r.think
        assert [ln[:3] for ln in shuffled.think.split("\n")[2:5]] == ["1. ", "2. ", "3. "]  # renumbered
        assert {ln[3:] for ln in shuffled.think.split("\n")[2:5]} == {"Read x.", "Add 1 to x.", "Return the sum."}
        wrong = wrong_example(r, CTX, random.Random(0))
        assert wrong is not None and ("gives `1`" in wrong.think or "gives `3`" in wrong.think)
        cx = wrong_complexity(r, CTX, random.Random(0))
        assert cx is not None and "O(1)" not in cx.think and "This runs in O(" in cx.think
        assert wrong_complexity(Reasoning("no bound", CODE), CTX, random.Random(0)) is None

    def test_bugs(self):
        bugs = dict(bug_candidates(CODE))
        assert bugs == {
            "+->-@3:17": CODE.replace("x + 1", "x - 1"),
            "1->2@3:19": CODE.replace("x + 1", "x + 2"),
        }


class TestPairs:
    def build(self, problems, seed=0):
        responses = {p.id: RESPONSE for p in problems}
        return build_pairs(problems, responses, seed=seed, judge=stub_judge)

    def test_valid(self):
        problems = [problem(i, "heldout" if i < 2 else "train") for i in range(6)]
        pairs, metrics = self.build(problems)
        assert len(pairs) == 18 and metrics["pairs"]["eval"] == dict.fromkeys(PAIR_TYPES, 2)
        assert {p["pair_type"] for p in pairs} == set(PAIR_TYPES)
        assert all(p["chosen"] != p["rejected"] for p in pairs)
        assert all(p["prompt"].endswith(RECODE_ASK) and ASK not in p["prompt"] for p in pairs)
        train, heldout = split_pairs(pairs)
        assert {p["problem_id"] for p in train}.isdisjoint({p["problem_id"] for p in heldout})
        assert {p["problem_id"] for p in heldout} == {"add-0", "add-1"}
        minus = next(p for p in pairs if p["pair_type"] == "base_minus")
        assert parse_recode(minus["rejected"]).code != CODE  # t- carries a code bug that the judge failed
        assert parse_recode(minus["chosen"]).code == CODE

    def test_deterministic(self):
        problems = [problem(i) for i in range(4)]
        assert self.build(problems) == self.build(problems)
        assert self.build(problems)[0] != self.build(problems, seed=1)[0]

    def test_invalid(self):
        bad = [problem(0), problem(1), problem(2)]
        responses = {"add-0": "no code", "add-2": RESPONSE.replace("x + 1", "x + 5")}  # add-2's base fails
        pairs, metrics = build_pairs(bad, responses, seed=0, judge=stub_judge)
        assert pairs == []
        assert metrics["dropped"] == {"no_code_in_response": 1, "no_response": 1, "base_fails": 1}
        with pytest.raises(ValueError, match="backend"):
            build_pairs(bad, responses, seed=0, backend="magic", judge=stub_judge)

    def test_llm_backend(self):
        class Client:
            def complete_many(self, batch):
                plus = Reasoning("Add one; checked on x = 1.", CODE).render()
                return [plus if "better" in m[1]["content"] else "not the format" for m in batch]

        problems = [problem(0)]
        pairs, metrics = build_pairs(
            problems, {"add-0": RESPONSE}, seed=0, backend="llm", teacher=llm_teacher(Client()), judge=stub_judge
        )
        assert pairs == [] and metrics["dropped"]["llm_unreadable"] == 1


def test_real_responses_through_the_judge(leetcode_problems, data_mirror):
    """Twenty real problems with their LeetCodeDataset responses, judged in the sandbox."""
    from codethinker.data.sources import load_leetcode

    folder = data_mirror / "leetcodedataset"
    paths = [(v, folder / f"LeetCodeDataset-{v}-train.jsonl.gz") for v in ("v0.1.0", "v0.2.0")]
    records, _ = load_leetcode(paths, extra=("response",))
    responses = {r["task_id"]: r["response"] for r in records}
    chosen = sorted(leetcode_problems, key=lambda p: p.id)[:20]
    chosen = [p if i % 5 else replace(p, split="heldout") for i, p in enumerate(chosen)]
    limits = JudgeLimits(test_timeout_s=2.0, setup_timeout_s=3.0, workers=2)
    pairs, metrics = build_pairs(chosen, responses, seed=0, limits=limits)
    assert metrics["problems_kept"] >= 15 and len(pairs) == 3 * metrics["problems_kept"]
    assert all(p["chosen"] != p["rejected"] for p in pairs)
    again, _ = build_pairs(chosen, responses, seed=0, limits=limits)
    assert again == pairs
    train, heldout = split_pairs(pairs)
    assert heldout and {p["problem_id"] for p in train}.isdisjoint({p["problem_id"] for p in heldout})
    assert recode_prompt(chosen[0]).endswith(RECODE_ASK)


def tiny_reward_model_data(tmp_path, problems: int):
    """CRPL pairs of ``problems`` problems (two held out), split, and a tiny Qwen2 base with a BPE trained on them."""
    from codethinker.training.bootstrap import build_tiny_model
    from codethinker.training.tokenizer import train_bpe

    pairs, _ = build_pairs([problem(i, "heldout" if i < 2 else "train") for i in range(problems)],
                           {f"add-{i}": RESPONSE for i in range(problems)}, seed=0, judge=stub_judge)  # fmt: skip
    train, heldout = split_pairs(pairs)
    tok = train_bpe([p["prompt"] + p["chosen"] + p["rejected"] for p in train], 300)
    base = build_tiny_model(tmp_path / "base", tok, seed=0, hidden_size=64, num_attention_heads=1,
                            num_key_value_heads=1, num_hidden_layers=1, intermediate_size=128)  # fmt: skip
    return train, heldout, base


@pytest.mark.slow
def test_reward_model_trains_and_scores(tmp_path):
    """A real Bradley-Terry run on the tiny Qwen2 (a few steps): the model is saved, reloads, and the
    metrics hold the held-out accuracy per pair type."""
    from codethinker.rewards.recode import ProcessRewardModel
    from codethinker.training.reward_model import RewardModelParams, run_reward_model

    train, heldout, base = tiny_reward_model_data(tmp_path, 8)
    p = RewardModelParams(max_steps=4, batch_size=4, grad_accum=1, learning_rate=3e-3, max_length=600, logging_steps=1)
    curve = tmp_path / "curve.csv"
    m = run_reward_model(str(base), train, heldout, tmp_path / "rm", p, seed=0, curve=curve)
    assert m["steps"] == 4 and m["trained_pairs"] + m["dropped_too_long"]["train"] == len(train) == 18
    assert set(m["eval"]) == {"all", *PAIR_TYPES} and m["eval"]["all"]["pairs"] <= 6
    assert curve.read_text().startswith("step,loss,accuracy,margin")
    scores = ProcessRewardModel(tmp_path / "rm").score([heldout[0]["prompt"]] * 2, [heldout[0]["chosen"]] * 2)
    assert len(scores) == 2 and scores[0] == pytest.approx(scores[1])
    json.dumps(m)


@pytest.mark.slow
def test_reward_model_is_a_function_of_its_seed(tmp_path):
    """The classifier's new ``score`` head is random: two runs with one seed, whatever the global RNG was
    before them, save the same weights (the head was drawn unseeded, so the stage differed run to run)."""
    import torch
    from safetensors.torch import load_file

    from codethinker.training.reward_model import RewardModelParams, run_reward_model

    train, heldout, base = tiny_reward_model_data(tmp_path, 6)
    p = RewardModelParams(max_steps=1, batch_size=4, grad_accum=1, learning_rate=3e-3, max_length=600, logging_steps=1)
    weights = []
    for run, noise in enumerate([1, 2]):
        torch.manual_seed(noise)  # what ran before the stage in this process
        run_reward_model(str(base), train, heldout, tmp_path / f"rm{run}", p, seed=0)
        weights.append(load_file(tmp_path / f"rm{run}" / "model.safetensors"))
    assert weights[0].keys() == weights[1].keys() and "score.weight" in weights[0]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_load_classifier_checks_the_new_head_quietly_and_refuses_a_foreign_checkpoint(tmp_path, caplog, capfd):
    """From a causal LM only ``score`` is new: no 12-line MISSING table, a working one-logit model; a
    checkpoint whose body weights are missing (another architecture's files) is an error, not a random body."""
    import logging

    import torch
    from safetensors.torch import load_file, save_file

    from codethinker.rewards.recode import load_classifier
    from codethinker.training.bootstrap import build_tiny_model
    from codethinker.training.tokenizer import train_bpe

    tok = train_bpe(["def f(x):\n    return x + 1\n"] * 4, 300)
    base = build_tiny_model(tmp_path / "base", tok, seed=0, hidden_size=64, num_attention_heads=1,
                            num_key_value_heads=1, num_hidden_layers=1, intermediate_size=128)  # fmt: skip
    with caplog.at_level(logging.WARNING):
        net = load_classifier(base)
    err = capfd.readouterr().err
    assert "LOAD REPORT" not in caplog.text and "MISSING" not in err
    assert "not sharded" not in err  # transformers checks its tensor-parallel plan when that logger is >= WARNING
    assert net.score.out_features == 1 and net(torch.tensor([[1, 2, 3]])).logits.shape == (1, 1)
    assert not logging.getLogger("transformers.modeling_utils").filters  # the filter is removed
    weights = load_file(base / "model.safetensors")
    save_file({k: v for k, v in weights.items() if "layers.0.mlp" not in k}, base / "model.safetensors")
    with pytest.raises(ValueError, match=r"weights missing \(model\.layers\.0\.mlp"):
        load_classifier(base)
