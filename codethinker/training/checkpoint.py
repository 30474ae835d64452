"""A training run's checkpoints and outputs, for SFT (:mod:`~codethinker.training.sft`) and GRPO
(:mod:`~codethinker.training.grpo_local`; :mod:`~codethinker.training.verl_merge` writes verl's model
with :func:`save_merged`).

Checkpoints live in ``<out>/checkpoints`` next to a ``fingerprint.json`` of what the run trains
(:func:`fingerprint`: its parameters, input files, the rows it trains on and the model). A run
started again with the same fingerprint resumes from its last ``checkpoint-N``
(:func:`prepare_checkpoints`, :func:`resume_point`), so a killed run loses only its unfinished
step; a different fingerprint clears the stale checkpoints first. A run whose last checkpoint is its
final step (DVC reruns a finished stage when its code changed) starts over as a fresh run would:
transformers' trainer, resumed at its last step, trains one step more.

The trained policy is written as ``<out>/adapter`` (PEFT, the LoRA runs) and ``<out>/merged`` (the
adapter merged into the base, or the fully fine-tuned model, safetensors), each with the tokenizer
(:func:`save_policy`): what vLLM and the next stage load.

>>> ck, resume = prepare_checkpoints(Path("models/sft"), fingerprint(p, data, rows, model))  # doctest: +SKIP
>>> save_policy(trainer.model, tok, Path("models/sft"), lora=True)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "checkpoint_dir",
    "fingerprint",
    "hash_files",
    "last_checkpoint",
    "prepare_checkpoints",
    "resume_point",
    "save_merged",
    "save_policy",
]


def hash_files(*paths: str | os.PathLike[str]) -> str:
    """A short hash of files' bytes; of a folder (a model), its files' names and sizes; of a path that
    does not exist (a hub id), the text."""
    h = hashlib.sha256()
    for p in paths:
        p = Path(p)
        if p.is_file():
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
        elif p.is_dir():  # a model folder: its config and weights' names/sizes
            for f in sorted(p.rglob("*")):
                if f.is_file() and "checkpoint" not in f.parts[-2]:
                    h.update(f"{f.relative_to(p)}:{f.stat().st_size}".encode())
        else:
            h.update(str(p).encode())
    return h.hexdigest()[:16]


def fingerprint(params: Any, data: str | os.PathLike[str], rows: Any, model: str | os.PathLike[str]) -> dict[str, Any]:
    """What a run trains: its parameters (a dataclass), the data file, the rows it trains on (after
    filtering and ordering) and the model (its name and files)."""
    rows_hash = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]
    return {
        "params": dataclasses.asdict(params),
        "data": hash_files(data),
        "rows": rows_hash,
        "model": str(model),
        "model_files": hash_files(model),
    }


def checkpoint_dir(out: Path, fingerprint: dict[str, Any]) -> Path:
    """``out/checkpoints``, emptied first when it holds another run's checkpoints."""
    ck = Path(out) / "checkpoints"
    fp_path = ck / "fingerprint.json"
    text = json.dumps(fingerprint, sort_keys=True, default=str)
    if ck.exists() and (not fp_path.is_file() or fp_path.read_text() != text):
        shutil.rmtree(ck)
    ck.mkdir(parents=True, exist_ok=True)
    fp_path.write_text(text)
    return ck


def last_checkpoint(ck: Path) -> str | None:
    """The newest complete ``checkpoint-N`` (one with a trainer_state.json), else None."""
    best: tuple[int, Path] | None = None
    for d in Path(ck).glob("checkpoint-*"):
        try:
            step = int(d.name.split("-")[1])
        except (IndexError, ValueError):
            continue
        if (d / "trainer_state.json").is_file() and (best is None or step > best[0]):
            best = (step, d)
    return str(best[1]) if best else None


def finished(checkpoint: str | os.PathLike[str]) -> bool:
    """Whether the run that wrote ``checkpoint`` had reached its last step (its ``trainer_state.json``:
    ``global_step`` >= ``max_steps``)."""
    try:
        state = json.loads((Path(checkpoint) / "trainer_state.json").read_text())
        return int(state.get("global_step") or 0) >= int(state.get("max_steps") or 0) > 0
    except (OSError, ValueError, TypeError):
        return False


def resume_point(ck: Path) -> str | None:
    """The checkpoint to resume from: the newest complete one, unless its run had finished; then the folder is
    emptied (its fingerprint kept) and None returned, so the run starts over as a fresh one would."""
    last = last_checkpoint(ck)
    if last is None or not finished(last):
        return last
    for item in Path(ck).iterdir():
        if item.name != "fingerprint.json":
            shutil.rmtree(item) if item.is_dir() else item.unlink()
    return None


def prepare_checkpoints(out: Path, fp: dict[str, Any]) -> tuple[Path, str | None]:
    """``(checkpoint folder, checkpoint to resume from or None)`` of a run with fingerprint ``fp``."""
    ck = checkpoint_dir(out, fp)
    return ck, resume_point(ck)


LOADER_KWARGS = ("local_files_only",)  # how a tokenizer was loaded (it follows HF_HUB_OFFLINE), not what it is


def save_tokenizer(tokenizer: Any, dest: Path | str) -> None:
    """``tokenizer.save_pretrained(dest)`` without the loader's ``local_files_only``. transformers writes the
    keyword arguments a tokenizer was loaded with into ``tokenizer_config.json``, and that one is
    ``HF_HUB_OFFLINE``'s: the same model saved under ``make run`` (offline) and under a plain ``dvc repro``
    differed in that file, so DVC reran every stage after it. The tokenizer itself is left as it was."""
    kept = {key: tokenizer.init_kwargs.pop(key) for key in LOADER_KWARGS if key in tokenizer.init_kwargs}
    try:
        tokenizer.save_pretrained(str(dest))
    finally:
        tokenizer.init_kwargs.update(kept)


def save_merged(model: Any, tokenizer: Any, dest: Path, *, lora: bool = True, dtype: str | None = None) -> None:
    """``dest``: the model (a PEFT model merged first when ``lora``), safetensors, and the tokenizer; ``dtype``
    (``bfloat16``, ``float32``): the weights written in it (the model is cast in place: saving comes last)."""
    merged = model.merge_and_unload() if lora else model
    if dtype is not None:
        import torch

        merged = merged.to(getattr(torch, dtype))
    merged.save_pretrained(str(dest), safe_serialization=True)
    save_tokenizer(tokenizer, dest)


def save_policy(model: Any, tokenizer: Any, out: Path, *, lora: bool = True, dtype: str | None = None) -> None:
    """``out/adapter`` (``lora`` only: the PEFT adapter and the tokenizer) and ``out/merged`` (in ``dtype``)."""
    if lora:
        model.save_pretrained(str(Path(out) / "adapter"))
        save_tokenizer(tokenizer, Path(out) / "adapter")
    save_merged(model, tokenizer, Path(out) / "merged", lora=lora, dtype=dtype)
