"""One process of a multi-process SFT run (``sft.processes`` > 1).

Run by :func:`codethinker.training.sft_launch.launch_sft` as ``accelerate launch ... -m
codethinker.training.sft_worker SPEC``: SPEC (JSON) names the model, the rows in training order, the checkpoint
folder and the checkpoint to resume, the output folder and the parameters. Every process trains
(:func:`codethinker.training.sft.train_sft`); rank 0 writes the log CSV and the policy and then SPEC's
``result``: the steps, losses, runtime, the history and the metrics it would have sent to MLflow.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["Recorder", "main"]


class Recorder:
    """Stands in for the stage's MLflow run in rank 0: keeps ``(step, metrics)`` for the stage to send."""

    def __init__(self) -> None:
        self.logged: list[tuple[int, dict[str, Any]]] = []

    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        self.logged.append((step or 0, dict(metrics)))


def main(argv: list[str] | None = None) -> None:
    from codethinker.logs import quiet_libraries

    quiet_libraries()
    from codethinker.training.common import LoRAParams
    from codethinker.training.sft import SFTParams, load_tokenizer, train_sft

    spec = json.loads(Path((argv if argv is not None else sys.argv[1:])[0]).read_text())
    raw = spec["params"]
    p = SFTParams(**{**raw, "lora": LoRAParams(**raw["lora"])})
    with open(spec["rows"]) as fh:
        rows = [json.loads(line) for line in fh]
    first = int(os.environ.get("RANK", "0")) == 0
    recorder = Recorder() if first else None
    trained = train_sft(
        spec["model"], load_tokenizer(spec["model"]), rows, Path(spec["checkpoints"]), spec["resume"],
        Path(spec["out"]), p, ordered=spec["ordered"], run=recorder, main=first,
    )  # fmt: skip
    if recorder is not None:
        Path(spec["result"]).write_text(json.dumps({**trained, "logged": recorder.logged}))


if __name__ == "__main__":
    main()
