"""verl's last checkpoint -> ``<out>/adapter`` and ``<out>/merged``, the outputs the local backend
writes (``dvc.yaml``'s ``grpo`` outs, read by ``train_eval`` and ``evaluate@grpo``).

Run in the verl environment after ``main_ppo`` (:func:`codethinker.training.grpo_verl.run_grpo_verl`
does)::

    .venv-verl/bin/python -m codethinker.training.verl_merge \\
        --checkpoints models/grpo/checkpoints --out models/grpo --base models/sft/merged

verl's trainer saves ``<checkpoints>/global_step_N/actor`` (one ``model_world_size_W_rank_R.pt``
shard per FSDP rank, ``fsdp_config.json``, ``huggingface/`` with config and tokenizer, and
``lora_train_meta.json`` with LoRA) and records the last complete step in
``latest_checkpointed_iteration.txt``. :func:`latest_actor_checkpoint` picks that step (or, without
a usable tracker, the highest complete one); :func:`export_checkpoint` runs verl's own merger on it
(``python -m verl.model_merger merge --backend fsdp``), which joins the shards and, for a LoRA
actor, writes the adapter apart (``lora_adapter/``, PEFT format). Then:

- ``adapter``: that PEFT adapter (``base_model_name_or_path`` = the base) and the tokenizer;
- ``merged``: the base model (``--base``, the GRPO stage's initial policy, whose weights LoRA kept
  frozen) with the adapter merged in (``merge_and_unload``), safetensors, and the tokenizer: a plain
  transformers model directory that vLLM loads.

Without LoRA (full fine-tuning) ``merged`` is the merger's model and no ``adapter`` is written.
Both directories are replaced whole, only after the new ones are complete. Every FSDP rank writes its
shard under ``trainer.default_local_dir`` on its own node, so on several nodes that directory must be
on a filesystem they share; a checkpoint missing a rank's shard is never exported.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["TRACKER", "export_checkpoint", "latest_actor_checkpoint", "main", "merger_command"]

TRACKER = "latest_checkpointed_iteration.txt"
_STEP_DIR = re.compile(r"^global_step_(\d+)$")


def _complete(actor: Path) -> bool:
    """Every rank's model shard is there (``fsdp_config.json`` names the world size)."""
    try:
        world = int(json.loads((actor / "fsdp_config.json").read_text())["world_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return world > 0 and all((actor / f"model_world_size_{world}_rank_{r}.pt").is_file() for r in range(world))


def latest_actor_checkpoint(checkpoints: str | Path) -> tuple[int, Path]:
    """``(step, <checkpoints>/global_step_<step>/actor)`` of the checkpoint to export.

    The step in verl's tracker file when that checkpoint is complete, else the highest complete
    ``global_step_*``. Raises ``FileNotFoundError`` when there is none.
    """
    root = Path(checkpoints)
    steps = {
        int(m.group(1)): d / "actor"
        for d in (root.iterdir() if root.is_dir() else [])
        if d.is_dir() and (m := _STEP_DIR.match(d.name)) and _complete(d / "actor")
    }
    tracker = root / TRACKER
    if tracker.is_file():
        text = tracker.read_text().strip()
        if text.isdigit() and int(text) in steps:
            return int(text), steps[int(text)]
    if not steps:
        raise FileNotFoundError(
            f"no complete verl checkpoint (global_step_N/actor with every rank's FSDP shard) in {root}; on several "
            "nodes trainer.default_local_dir must be on a filesystem they share"
        )
    step = max(steps)
    return step, steps[step]


def merger_command(actor: Path, target: Path, python: str | None = None) -> list[str]:
    """verl's own merger for an FSDP actor checkpoint."""
    return [
        python or sys.executable,
        "-m",
        "verl.model_merger",
        "merge",
        "--backend",
        "fsdp",
        "--local_dir",
        str(actor),
        "--target_dir",
        str(target),
    ]


def _write_adapter(lora_dir: Path, base: str, dest: Path) -> None:
    dest.mkdir(parents=True)
    config = json.loads((lora_dir / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = base
    (dest / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
    shutil.copy2(lora_dir / "adapter_model.safetensors", dest / "adapter_model.safetensors")


def _merge_adapter(base: str, adapter: Path, tokenizer: Any, dest: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from codethinker.training.checkpoint import save_merged

    model = AutoModelForCausalLM.from_pretrained(base, dtype="auto")
    save_merged(PeftModel.from_pretrained(model, str(adapter)), tokenizer, dest)


def _replace(staged: Path | None, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    if staged is not None:
        staged.rename(dest)


def export_checkpoint(
    checkpoints: str | Path, out: str | Path, base: str | Path, python: str | None = None
) -> dict[str, Any]:
    """Write ``<out>/adapter`` (LoRA) and ``<out>/merged`` from the latest verl checkpoint."""
    from transformers import AutoTokenizer

    from codethinker.training.checkpoint import save_tokenizer

    step, actor = latest_actor_checkpoint(checkpoints)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    base = str(base)
    with tempfile.TemporaryDirectory(dir=out, prefix=".verl-export-") as tmp_name:
        tmp = Path(tmp_name)
        hf = tmp / "hf"
        res = subprocess.run(merger_command(actor, hf, python), capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"verl.model_merger failed on {actor}:\n{(res.stdout + res.stderr)[-4000:]}")
        lora = hf / "lora_adapter"
        has_lora = lora.is_dir()
        tok = AutoTokenizer.from_pretrained(base)
        adapter: Path | None
        if has_lora:
            adapter, merged = tmp / "adapter", tmp / "merged"
            _write_adapter(lora, base, adapter)
            save_tokenizer(tok, adapter)
            _merge_adapter(base, adapter, tok, merged)
        else:
            # Full fine-tuning: the merger's model is the policy. Its tokenizer files are verl's save, which
            # keeps how verl loaded it (local_files_only), so they are written again as every stage writes them.
            adapter, merged = None, hf
            save_tokenizer(tok, merged)
        _replace(adapter, out / "adapter")
        _replace(merged, out / "merged")
    return {
        "step": step,
        "checkpoint": str(actor),
        "adapter": str(out / "adapter") if has_lora else None,
        "merged": str(out / "merged"),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoints", required=True, help="verl's trainer.default_local_dir")
    ap.add_argument("--out", required=True, help="where adapter/ and merged/ go")
    ap.add_argument("--base", required=True, help="the model GRPO started from (path or hub id)")
    args = ap.parse_args(argv)
    print(json.dumps(export_checkpoint(args.checkpoints, args.out, args.base)))


if __name__ == "__main__":
    main()
