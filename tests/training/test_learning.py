"""GRPO learns: a few updates on the local path raise a reward the policy can move, for regular and DBS rollouts.

The real path: :func:`~codethinker.training.grpo_local.make_grpo_trainer` (TRL's GRPOTrainer, LoRA or
every weight, group-normalized advantages) with :class:`~codethinker.training.rollout.Rollout` sampling through
the ``hf`` engine, which wraps the live training model. The test fails when the advantages have
the wrong sign, when rewards reach the wrong completions, or when the rollout engine keeps sampling
the initial policy: each of these was checked by breaking the code on purpose (issue 10).

Set-up, and why:
- policy: a random 2-layer Qwen2 (:func:`~codethinker.training.bootstrap.build_tiny_model`) on a
  300-token byte-level BPE trained here in a second (:func:`~codethinker.training.tokenizer.train_bpe`);
- reward: the share of the completion's tokens that are ASCII letters (``LetterShare``), 0.1-0.4
  for the random policy (seeds 0-2) and 1.0 once it writes letters only;
- untied output layer and sampling temperature 0.1: a random model's logits are ``|h| * |w|``, at
  most ~2.6 with width 128 and init std 0.02, and LoRA can only move ``h`` (TRL refuses an adapter
  on ``lm_head``), so at temperature 1 ten updates left the letter share where it was (0.23, 0.20). At 0.1
  they do (TRL divides the logits by the same temperature, so the loss sees the distribution that
  was sampled). With tied embeddings the random model copies its last token at that temperature.
- DBS: the project's PRM (``prefix_score``) scores ConTra blocks, which a random policy never writes:
  it gives every such prefix 0.0, so DBS would be plain sampling cut into pieces. Here a block ends
  at each letter (``block_stop``) and the DBS scorer is the reward on the prefix, so DBS steers its
  budget to the prefixes with the fewest non-letters, as the PRM steers it to consistent LOCALS.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import pytest

from .tinydata import truths

STEPS = 10
GROUP = 8  # samples per prompt, two prompts per step
LEARNING_RATE = 5e-3
FULL_LR = 1e-3  # finetune: full (grpo.finetune, the micro policy's choice): every weight moves
TEMPERATURE = 0.1


def letter_ids(tok: Any) -> frozenset[int]:
    """Ids of the tokens made of ASCII letters only (single letters and merges such as ``LOCALS``)."""
    return frozenset(i for s, i in tok.get_vocab().items() if s.isascii() and s.isalpha())


class LetterShare:
    """TRL reward function: the share of a completion's tokens (end of turn aside) that are letters.

    Records, per call (one optimizer step), each completion's reward and rollout kind."""

    __name__ = "letter_share"

    def __init__(self, tok: Any):
        self.tok = tok
        self.letters = letter_ids(tok)
        self.eos = tok.convert_tokens_to_ids("<|im_end|>")
        self.steps: list[list[tuple[str, float]]] = []

    def share(self, ids: list[int]) -> float:
        ids = [i for i in ids if i != self.eos]
        return sum(i in self.letters for i in ids) / max(len(ids), 1)

    def prefix_score(self, text: str, flow: Any) -> float:
        """DBS scorer (``Rollout.scorer``): the same share on the decoded prefix, re-tokenized."""
        return self.share(self.tok(text, add_special_tokens=False).input_ids)

    def __call__(self, completions: list, completion_ids: list, rollout_kind: list[str], **_: Any) -> list[float]:
        rewards = [self.share(ids) for ids in completion_ids]
        self.steps.append(list(zip(rollout_kind, rewards, strict=True)))
        return rewards

    def means(self) -> list[float]:
        return [sum(r for _, r in step) / len(step) for step in self.steps]


def tiny_tokenizer() -> Any:
    """A 300-token byte-level BPE trained on the hand-made traces (about a second)."""
    from codethinker.contra.render import render_trace
    from codethinker.contra.tracer import Flow
    from codethinker.training.tokenizer import train_bpe

    return train_bpe([render_trace(Flow.from_json(t)) for t in truths()] * 20, vocab_size=300)


def learning_run(
    tmp: Path, mode: str, seed: int, lr: float = LEARNING_RATE, steps: int = STEPS, finetune: str = "lora"
) -> dict[str, Any]:
    """``steps`` GRPO steps from a fresh random policy (``mode``: regular or dbs rollouts only;
    ``finetune``: a LoRA adapter or every weight); the mean reward of each step's rollouts, the
    rollout kinds seen and the rollout stats."""
    from codethinker.contra.tracer import Flow
    from codethinker.training.bootstrap import build_tiny_model
    from codethinker.training.grpo import grpo_params
    from codethinker.training.grpo_local import make_grpo_trainer

    tok = tiny_tokenizer()
    model = build_tiny_model(tmp / "policy", tok, seed=seed, tie_word_embeddings=False)
    rows = [
        {"id": f"p{i}", "prompt": [{"role": "user", "content": f"Trace f({Flow.from_json(t).input})"}], "truth": t}
        for i, t in enumerate(truths())
    ]
    n_regular, n_dbs = (GROUP, 0) if mode == "regular" else (0, GROUP)
    p = grpo_params(
        {
            "max_steps": steps,
            "prompts_per_step": 2,
            "micro_batch": 2 * GROUP,
            "learning_rate": lr,
            "finetune": finetune,
            "rollout_engine": "hf",
            "seed": seed,
            "save_steps": 10_000,
            "lora": {"r": 8, "alpha": 16, "dropout": 0.0},
            "rollout": {
                "n_regular": n_regular,
                "n_dbs": n_dbs,
                "max_completion_tokens": 8,
                "temperature": TEMPERATURE,
                "block_stop": list(string.ascii_letters),
            },
        }
    )
    reward = LetterShare(tok)
    trainer, rollout = make_grpo_trainer(model, rows, tmp / "ck", p, reward_funcs=[reward])
    rollout.scorer = reward.prefix_score
    trainer.train()
    kinds = {k for step in reward.steps for k, _ in step}
    return {"means": reward.means(), "kinds": kinds, "stats": rollout.stats.take()}


@pytest.fixture
def one_thread():
    """Torch on one thread: for a model this small, more threads only wait on each other (on a busy
    machine two threads made the DBS case 75 s instead of 5 s)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize(("mode", "finetune"), [("regular", "lora"), ("dbs", "lora"), ("regular", "full")])
def test_grpo_raises_the_reward(mode: str, finetune: str, tmp_path: Path, one_thread: None) -> None:
    out = learning_run(tmp_path, mode, seed=0, finetune=finetune, lr=LEARNING_RATE if finetune == "lora" else FULL_LR)
    means = out["means"]
    assert len(means) == STEPS and out["kinds"] == {mode}
    if mode == "dbs":  # DBS ran block rounds and dropped the prefixes it did not pick
        assert out["stats"]["rollout/dbs_rounds"] > 1 and out["stats"]["rollout/dbs_tokens_dropped"] > 0
    # seeds 0-2 (1 thread): first two steps 0.11-0.50, last three 1.00; broken GRPO: last three <= 0.40
    first, last = sum(means[:2]) / 2, sum(means[-3:]) / 3
    assert last >= 0.7 and last - first >= 0.3, f"mean reward per step: {[round(m, 2) for m in means]}"
