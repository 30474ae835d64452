"""The order SFT trains its rows in: a curriculum for a policy trained from scratch.

``sft.copy_warmup`` first spends a share of the steps on *copy rows*, whose answer is the prompt itself;
``sft.short_first`` then spends a share of the trace steps on the shorter half of the rows before every row
(short programs before long ones and LeetCode's: the ``micro-long`` profile). Both are one list of rows for
the whole run (:func:`curriculum`), fed to the trainer unshuffled; with neither, the trainer groups the rows
by length itself.
"""

from __future__ import annotations

import math
import random
from typing import Any

__all__ = ["copy_row", "curriculum", "training_order"]


def copy_row(row: dict[str, Any]) -> dict[str, Any]:
    """The copy lesson of a row: same prompt, the answer is the prompt's text verbatim.

    >>> copy_row({"prompt": [{"role": "user", "content": "[CODE]..."}], "completion": []})["completion"]
    [{'role': 'assistant', 'content': '[CODE]...'}]
    """
    return {"prompt": row["prompt"], "completion": [{"role": "assistant", "content": row["prompt"][-1]["content"]}]}


def curriculum(
    lengths: list[int],
    copy_lengths: list[int],
    batches: int,
    batch_size: int,
    copy_share: float,
    seed: int = 0,
    short_share: float = 0.0,
) -> list[tuple[str, int]]:
    """The row order of a whole run: ``("copy", i)`` for the first ``copy_share`` of ``batches``, then
    ``("trace", i)``: the first ``short_share`` of those from the rows at most the median length, the rest
    from every row. Each phase reshuffles its rows every pass, cuts them into full batches of similar
    length (sorted within windows of 64 batches) and shuffles the batches.

    >>> order = curriculum([5, 9, 7, 8], [3, 4], batches=4, batch_size=2, copy_share=0.25)
    >>> [kind for kind, _ in order]
    ['copy', 'copy', 'trace', 'trace', 'trace', 'trace', 'trace', 'trace']
    >>> [i for _, i in curriculum([5, 9, 7, 8], [], batches=2, batch_size=2, copy_share=0.0, short_share=0.5)][:2]
    [0, 2]
    """
    rng = random.Random(seed)
    n_copy = round(batches * copy_share) if copy_lengths else 0
    n_short = round((batches - n_copy) * short_share)

    def phase(lens: list[int], n: int) -> list[int]:
        if n and len(lens) < batch_size:
            raise ValueError(f"{len(lens)} rows cannot fill a batch of {batch_size}")
        out: list[list[int]] = []
        while len(out) < n:
            order = list(range(len(lens)))
            rng.shuffle(order)
            groups = []
            for s in range(0, len(order), 64 * batch_size):
                window = sorted(order[s : s + 64 * batch_size], key=lens.__getitem__)
                full = len(window) // batch_size * batch_size
                groups += [window[i : i + batch_size] for i in range(0, full, batch_size)]
            rng.shuffle(groups)
            out += groups
        return [i for g in out[:n] for i in g]

    copies = [("copy", i) for i in phase(copy_lengths, n_copy)]
    short: list[int] = []
    if n_short:
        median = sorted(lengths)[(len(lengths) - 1) // 2]
        rows = [i for i, n in enumerate(lengths) if n <= median]
        short = [rows[j] for j in phase([lengths[i] for i in rows], n_short)]
    return copies + [("trace", i) for i in short + phase(lengths, batches - n_copy - n_short)]


def training_order(
    kept: list[dict[str, Any]], lengths: list[int], n_chars: Any, p: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """``(rows in training order, copy rows, optimizer steps on copy rows)`` for ``p``, the run's
    :class:`~codethinker.training.sft.SFTParams` (not imported: sft imports this module). With ``copy_warmup`` the
    whole run's :func:`curriculum` (also with ``short_first`` alone), else the rows as they are (the trainer
    groups them by length)."""
    if not p.copy_warmup and not p.short_first:
        return kept, [], 0
    copies: list[dict[str, Any]] = []
    copy_lengths: list[int] = []
    if p.copy_warmup:
        candidates = [copy_row(c) for c in kept]
        pairs = list(zip(candidates, n_chars([c["prompt"] + c["completion"] for c in candidates]), strict=True))
        copies, copy_lengths = [c for c, n in pairs if n], [n for _, n in pairs if n]
    if p.max_steps > 0:
        batches = p.max_steps * p.grad_accum
    else:
        batches = math.ceil(math.ceil(p.epochs * len(kept) / p.step_rows) / (1 - p.copy_warmup))
    order = curriculum(lengths, copy_lengths, batches, p.step_rows, p.copy_warmup, p.seed, p.short_first)
    train_rows = [copies[i] if kind == "copy" else kept[i] for kind, i in order]
    copy_steps = sum(kind == "copy" for kind, _ in order) // (p.step_rows * p.grad_accum)
    return train_rows, copies, copy_steps
