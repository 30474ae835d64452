"""Stage sft: SFT of the policy on the ConTra traces (paper: LoRA, 3 epochs; from scratch: full).

Run: ``python -m stages.sft --data data/contra_sft/sft.jsonl --out models/sft --metrics metrics/sft.json
--plot plots/sft_loss.csv`` (its cmd in dvc.yaml: ``dvc repro sft``). Reads ``params.yaml`` ``sft``
(profile-dependent values resolved by ``base.profile``; ``model``: the policy trained, null: ``model.base``) and
contra_sft's SFT rows. Writes ``<out>/merged`` (what vLLM and the grpo stage load), ``<out>/adapter`` (PEFT, with
``finetune: lora``), checkpoints in ``<out>/checkpoints`` (a restarted run resumes from the last one), the
metrics and the loss curve; metrics go to MLflow as the ``sft`` child run. With ``sft.processes`` > 1 the training
runs in that many processes under ``accelerate launch`` (:mod:`codethinker.training.sft_launch`); this process keeps
the MLflow run and writes the metrics.
"""

from __future__ import annotations

from codethinker.config import load_config
from codethinker.config.sft import SFTConfig
from codethinker.data.io import write_json
from codethinker.ops.stage import path, stage_args, stage_main, stage_run
from codethinker.training.sft import run_sft

ARGS = stage_args(
    "sft",
    __doc__,
    data=path("the SFT rows (chat JSONL)", rows=True),
    out=path("folder of merged/, adapter/ (LoRA) and checkpoints/"),
    metrics=path("the run's metrics (JSON)"),
    plot=path("the loss curve per step (CSV)"),
)


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(SFTConfig)
    data, out, model, p = paths.data, paths.out, str(cfg.model), cfg.params
    with stage_run("sft", cfg.as_dict()) as run:
        metrics = run_sft(model, data, out, p, run=run)
        if (out / "train_log.csv").exists():
            paths.plot.parent.mkdir(parents=True, exist_ok=True)
            paths.plot.write_text((out / "train_log.csv").read_text())
        if p.finetune == "lora":  # not a DVC out (the autolog does not see it)
            run.log_artifact(out / "adapter", "adapter")
        write_json(paths.metrics, {"model": model, **metrics})
    print(
        f"sft: {metrics['steps']} steps, loss {metrics['first_loss']} -> {metrics['last_loss']}, "
        f"{metrics['wall_s']} s -> {out}/merged"
    )


if __name__ == "__main__":
    main()
