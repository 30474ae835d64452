"""Stage sft: SFT of the policy on the ConTra traces (paper: LoRA, 3 epochs; from scratch: full).

    python -m stages.sft          # or: dvc repro sft

Reads ``params.yaml`` ``sft`` (profile-dependent values resolved by ``base.profile``) and
``model.base``; input ``data/contra_sft/sft.jsonl``. Writes ``models/sft/merged`` (what vLLM and
the grpo stage load), ``models/sft/adapter`` (PEFT, with ``finetune: lora``), checkpoints in
``models/sft/checkpoints`` (a restarted run resumes from the last one), ``metrics/sft.json`` and
the loss curve ``plots/sft_loss.csv``; metrics go to MLflow as the ``sft`` child run.
"""

from __future__ import annotations

from pathlib import Path

from codethinker.config import load_config
from codethinker.config.sft import SFTConfig
from codethinker.data.io import write_json
from codethinker.ops.stage import stage_main, stage_run
from codethinker.training.sft import run_sft

METRICS, PLOT = Path("metrics/sft.json"), Path("plots/sft_loss.csv")


@stage_main
def main() -> None:
    cfg = load_config(SFTConfig)
    data, out, model, p = Path(cfg.data), Path(cfg.out), str(cfg.model), cfg.params
    with stage_run("sft", cfg.as_dict()) as run:
        metrics = run_sft(model, data, out, p, run=run)
        if (out / "train_log.csv").exists():
            PLOT.parent.mkdir(parents=True, exist_ok=True)
            PLOT.write_text((out / "train_log.csv").read_text())
        if p.finetune == "lora":  # not a DVC out (the autolog does not see it)
            run.log_artifact(out / "adapter", "adapter")
        write_json(METRICS, {"model": model, **metrics})
    print(
        f"sft: {metrics['steps']} steps, loss {metrics['first_loss']} -> {metrics['last_loss']}, "
        f"{metrics['wall_s']} s -> {out}/merged"
    )


if __name__ == "__main__":
    main()
