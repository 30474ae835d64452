"""Stage reward_model: ReCode's CRPL reward model (Bradley-Terry, TRL's RewardTrainer) on the CRPL pairs.

Run: ``python -m stages.reward_model --train data/crpl/train.jsonl --eval data/crpl/eval.jsonl
--out models/reward_model --metrics metrics/reward_model.json --plot plots/reward_model_loss.csv`` (its cmd in
dvc.yaml: ``dvc repro reward_model``). Reads ``params.yaml: recode`` (``model``: null is ``model.base``, the
bootstrap stage's tiny policy; ``rm``: the training) and crpl_data's pairs; writes the model and its tokenizer
(what :class:`codethinker.rewards.recode.ProcessRewardModel` loads; the grpo stage's ``--reward-model``), the
metrics (held-out pairwise accuracy overall and per pair type) and the loss curve.
"""

from __future__ import annotations

from codethinker.config import load_config
from codethinker.config.recode import RecodeConfig
from codethinker.data.io import iter_jsonl, write_json
from codethinker.ops.stage import path, stage_args, stage_main, stage_run
from codethinker.training.reward_model import run_reward_model

ARGS = stage_args(
    "reward_model",
    __doc__,
    train=path("crpl_data's training pairs (JSONL)", rows=True),
    eval=path("crpl_data's held-out pairs (JSONL)", rows=True),
    out=path("the reward model's folder (model and tokenizer)"),
    metrics=path("held-out pairwise accuracy, overall and per pair type (JSON)"),
    plot=path("the loss curve per step (CSV)"),
)


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(RecodeConfig)
    assert cfg.model is not None  # filled from model.base by the config
    train, heldout = list(iter_jsonl(paths.train)), list(iter_jsonl(paths.eval))
    with stage_run("reward_model", cfg.as_dict()) as run:
        m = run_reward_model(cfg.model, train, heldout, paths.out, cfg.rm, cfg.base.seed, paths.plot, run)
        write_json(paths.metrics, m)
    acc = {k: v["accuracy"] for k, v in m["eval"].items()}
    print(f"reward_model: {m['steps']} steps, loss {m['first_loss']} -> {m['last_loss']}, held-out accuracy {acc}")


if __name__ == "__main__":
    main()
