"""TRL's SFTTrainer with the loss computed from the model's own logits (``sft.loss: logits``).

TRL 1.x computes the SFT loss with a chunked "fused LM head": the log-probabilities of the labels
are taken tile by tile, so a 152k-token vocabulary never materializes a (tokens x vocab) logits
tensor. For the from-scratch micro policy (a 1,024-token vocabulary, 1M parameters) that memory
is a few MiB and the tiles' Python loop and fp32 copies are pure overhead: the plain logits and
one ``cross_entropy`` make a step ~1.2x faster on two CPU cores
(``python benchmarks/bench_sft_step.py``, docs/benchmarks.md). The loss is the same quantity:
the summed negative log-likelihood of the completion tokens (labels != -100) divided by their
count over the whole optimizer step (``num_items_in_batch``), as TRL's. Logged as TRL logs them:
``mean_token_accuracy`` (top-1 on the completion tokens) and ``num_tokens`` (every
non-padding token seen), over every process of a multi-process run; the entropy TRL also logs is left out.
A padding-free batch (``sft.padding_free``: one packed row, the first token of each row labelled -100) needs
nothing else: a prediction across two rows has no label.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from trl import SFTTrainer

IGNORE = -100  # TRL's label for prompt and padding positions


def completion_nll(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(summed NLL, completion tokens, top-1 hits)`` of next-token ``logits`` against ``labels``.

    >>> logits = torch.tensor([[[0.0, 9.0], [9.0, 0.0], [0.0, 0.0]]])
    >>> nll, n, hits = completion_nll(logits, torch.tensor([[-100, 1, 0]]))
    >>> int(n), int(hits), round(float(nll), 4)
    (2, 2, 0.0002)
    """
    shift_logits, shift_labels = logits[:, :-1].float(), labels[:, 1:]
    mask = shift_labels != IGNORE
    nll = F.cross_entropy(shift_logits.flatten(0, 1), shift_labels.flatten(), ignore_index=IGNORE, reduction="sum")
    with torch.no_grad():
        hits = ((shift_logits.argmax(-1) == shift_labels) & mask).sum()
    return nll, mask.sum(), hits


class LogitsLossSFTTrainer(SFTTrainer):
    """``SFTTrainer`` whose ``compute_loss`` takes the model's logits (module docstring)."""

    def compute_loss(
        self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        mode = "train" if self.model.training else "eval"
        labels = inputs["labels"]
        model_inputs = {k: v for k, v in inputs.items() if k != "labels"}
        outputs = model(**model_inputs, use_cache=False)
        nll, n, hits = completion_nll(outputs.logits, labels)
        denom = n if num_items_in_batch is None else num_items_in_batch
        loss = nll / torch.as_tensor(denom, device=nll.device).clamp(min=1)
        if "attention_mask" in inputs:
            seen = inputs["attention_mask"].sum()
        else:  # padding-free: one packed row, every position a token
            seen = torch.tensor(inputs["position_ids"].size(1), device=nll.device)
        processes = self.accelerator.num_processes
        if processes > 1:  # num_items_in_batch counts every process's tokens and DDP averages: as Trainer's loss
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * processes
            n, hits, seen = (self.accelerator.gather(x.reshape(1)).sum() for x in (n, hits, seen))
        self._metrics[mode]["mean_token_accuracy"].append((hits / n).item() if n > 0 else 0.0)
        if mode == "train":
            self._total_train_tokens += int(seen)
        self._metrics[mode]["num_tokens"] = [self._total_train_tokens]
        return (loss, outputs) if return_outputs else loss
