"""Stage reward_model: ReCode's CRPL reward model (Bradley-Terry, TRL's RewardTrainer) on the CRPL pairs.

Run: ``python -m stages.reward_model`` (or ``dvc repro reward_model``). Reads ``params.yaml: recode``
(``model``: null is ``model.base``, the bootstrap stage's tiny policy; ``rm``: the training) and
``data/crpl/{train,eval}.jsonl``; writes ``models/reward_model`` (the model and its tokenizer, what
:class:`codethinker.rewards.recode.ProcessRewardModel` loads), ``metrics/reward_model.json`` (held-out
pairwise accuracy overall and per pair type) and the loss curve ``plots/reward_model_loss.csv``.
"""

from __future__ import annotations

from pathlib import Path

from codethinker.config import load_config
from codethinker.config.recode import RecodeConfig
from codethinker.data.io import iter_jsonl, write_json
from codethinker.ops.stage import stage_main, stage_run
from codethinker.training.reward_model import run_reward_model

TRAIN, EVAL = Path("data/crpl/train.jsonl"), Path("data/crpl/eval.jsonl")
METRICS, PLOT = Path("metrics/reward_model.json"), Path("plots/reward_model_loss.csv")


@stage_main
def main() -> None:
    cfg = load_config(RecodeConfig)
    assert cfg.model is not None  # filled from model.base by the config
    train, heldout = list(iter_jsonl(TRAIN)), list(iter_jsonl(EVAL))
    with stage_run("reward_model", cfg.as_dict()) as run:
        m = run_reward_model(cfg.model, train, heldout, Path(cfg.out), cfg.rm, cfg.base.seed, PLOT, run)
        write_json(METRICS, m)
    acc = {k: v["accuracy"] for k, v in m["eval"].items()}
    print(f"reward_model: {m['steps']} steps, loss {m['first_loss']} -> {m['last_loss']}, held-out accuracy {acc}")


if __name__ == "__main__":
    main()
