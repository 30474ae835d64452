"""SFT in several processes (``sft.processes`` > 1): DDP under ``accelerate launch``.

:func:`codethinker.training.sft.run_sft` reads, filters and orders the rows and prepares the checkpoint folder in
the stage's own process, then calls :func:`launch_sft`: it writes the run (rows, parameters, paths) to a temporary
folder and starts ``accelerate launch --multi_gpu --num_processes N -m codethinker.training.sft_worker SPEC``
(accelerate's torchrun launcher: one process per GPU with NCCL; on a CPU the trainer's ``use_cpu`` makes the same
processes use gloo, since accelerate's own several-CPU-process path needs mpirun). The stage waits for them; it
keeps its MLflow run. Each process trains on its share of every micro-batch; rank 0 alone writes
``train_log.csv`` (as it goes), the checkpoints (the trainer's rule) and the policy, and hands back the steps,
the losses and the metrics it logged, which the stage's process then sends to MLflow.

A step takes ``batch_size x grad_accum x processes`` rows, in the order one process takes them with
``batch_size x processes`` rows a micro-batch (the same loss curve, float rounding apart:
``tests/training/test_sft_options.py``):

- the curriculum (``copy_warmup``) cuts its batches of ``batch_size x processes`` rows
  (:func:`~codethinker.training.sft.training_order`); accelerate hands each process ``batch_size`` consecutive
  rows of each;
- ``group_by_length`` (no curriculum) groups rows by length in windows of the global batch
  (:class:`GlobalBatchOrder`), as one process does; the shuffle is the same seeded one;
- the loss is each process's summed NLL over the completion tokens of the whole step on every process, times
  the processes, and DDP averages the gradients: the one-process loss (TRL's and
  :mod:`codethinker.training.sft_logits`' rule).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from codethinker.errors import CodethinkerError

__all__ = ["WORKER", "GlobalBatchOrder", "LaunchError", "global_batch_order", "launch_command", "launch_sft"]

WORKER = "codethinker.training.sft_worker"  # the module each process runs


class LaunchError(CodethinkerError, RuntimeError):
    """The processes of a multi-process run failed (their own errors are printed above) or cannot start."""


class GlobalBatchOrder:
    """Trainer mixin for several processes: ``group_by_length`` sorts rows by length in windows of the global
    batch (transformers' sampler sizes them by one process's rows), so every process count gives one order."""

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        from transformers.trainer_pt_utils import LengthGroupedSampler

        sampler = super()._get_train_sampler(train_dataset)  # type: ignore[misc]
        world = self.args.world_size  # type: ignore[attr-defined]
        if isinstance(sampler, LengthGroupedSampler) and world > 1:
            sampler.batch_size *= world
        return sampler


def global_batch_order(trainer_cls: type) -> type:
    """``trainer_cls`` with :class:`GlobalBatchOrder`."""
    return type(trainer_cls.__name__, (GlobalBatchOrder, trainer_cls), {})


def launch_command(processes: int, spec: Path) -> list[str]:
    """The command that runs ``processes`` workers on ``spec`` (port 0: accelerate picks a free one)."""
    return [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
        "-m", WORKER, str(spec),
    ]  # fmt: skip


def _environment(processes: int) -> dict[str, str]:
    """This process's environment, the package importable, and on a CPU the cores shared out (torchrun would
    give each process one thread)."""
    import codethinker

    env = dict(os.environ)
    root = str(Path(codethinker.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(x for x in (root, env.get("PYTHONPATH", "")) if x)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    env.setdefault("OMP_NUM_THREADS", str(max(1, cores // processes)))
    return env


def _check_devices(processes: int) -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() < processes:
        raise LaunchError(f"sft.processes is {processes}, this machine has {torch.cuda.device_count()} GPU(s)")


def _wait(proc: subprocess.Popen) -> int:
    """``proc``'s exit code; stopped (SIGTERM: torchrun stops its workers) when this process is interrupted."""
    try:
        return proc.wait()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise


def launch_sft(
    model: str | Path, train_rows: list[dict[str, Any]], ck: Path, resume: str | None, out: Path, p: Any,
    *, ordered: bool, run: Any = None,
) -> dict[str, Any]:  # fmt: skip
    """Train ``train_rows`` in ``p.processes`` processes; return what
    :func:`~codethinker.training.sft.train_sft` returns, from rank 0, after sending its logged metrics to ``run``."""
    _check_devices(p.processes)
    with tempfile.TemporaryDirectory(prefix="sft-launch-") as tmp:
        folder = Path(tmp)
        with open(folder / "rows.jsonl", "w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in train_rows)
        spec = {
            "model": str(model),
            "rows": str(folder / "rows.jsonl"),
            "checkpoints": str(ck),
            "resume": resume,
            "out": str(out),
            "params": dataclasses.asdict(p),
            "ordered": ordered,
            "result": str(folder / "result.json"),
        }
        (folder / "spec.json").write_text(json.dumps(spec))
        cmd = launch_command(p.processes, folder / "spec.json")
        code = _wait(subprocess.Popen(cmd, env=_environment(p.processes)))
        if code != 0 or not (folder / "result.json").is_file():
            raise LaunchError(f"sft: {p.processes} training processes (accelerate launch) exited {code}")
        result = json.loads((folder / "result.json").read_text())
    for step, metrics in result.pop("logged"):
        if run is not None:
            run.log_metrics(metrics, step=step)
    return result
