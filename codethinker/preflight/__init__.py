"""Preflight: before a long run, check that what the chosen profile needs is there.

    codethinker preflight [--profile NAME] [--params params.yaml]   # one line per check, exit 0/1
    codethinker preflight --profile paper --show-params              # the resolved params, one per line

Every check is derived from the params resolved for the profile and read as the stages read them,
typed (:meth:`codethinker.config.ParamsFile.read`, each section's config class; ``--profile``
overrides ``base.profile`` for the resolution only, nothing is written), never from hard-coded model
names:

- LLM endpoints (``gen_inputs.llm`` when ``gen_inputs.backend`` is ``llm``, ``contra_sft.llm`` when
  ``contra_sft.teacher`` is ``llm``): ``GET <base_url>/models`` answers within a few seconds and lists
  the model.
- Hub models (``model.base``, ``sft.model``, ``grpo.init``, ``train_eval.models``, ``evaluate.models``,
  ``dedup.model`` unless it is the bundled MiniLM): a local folder, in the Hugging Face cache (looked
  up offline), or on the hub (a short ``HEAD`` request); a local path that is missing and that no stage
  makes is a failure. The bundled MiniLM needs its package installed.
- GPUs, when the profile trains on them (``grpo.backend: verl``, or a hub policy): the visible CUDA
  devices (counted by torch in a child process, so the caller holds no CUDA context) and their free
  memory against an estimate made from the policy's size (:func:`gpu_memory_need`): accelerate measures
  the policy built from its ``config.json`` on the meta device (:func:`policy_size`; a table of known
  hub models only when no config is reachable).
- The verl environment (``grpo.backend: verl``): its interpreter imports ``verl``.
- A Ray cluster (``grpo.verl.nnodes > 1``): reachable from the verl environment with enough nodes/GPUs.
- Data: every source file the ``fetch``/``eval_truth`` stages read is in the mirror or the download
  cache, or its pinned public URL answers a ``HEAD`` request; LiveCodeBench's hub dataset (a warning
  only: the stages skip it when the hub is unreachable); the tokenizer mirror when
  ``bootstrap.tokenizer`` is ``mirror``.

Each check gives a :class:`CheckResult` (``name``, ``status`` pass/fail/warn/skip, ``ok``, ``detail``,
``fix``). The network, GPUs, processes and the Hugging Face cache are reached only through
:class:`Probes`, so a test can hand in its own (a local HTTP server, a fake interpreter).

The package: :mod:`.probes` (the way out), :mod:`.checks` (results, plan entries, shared helpers), one
module per kind of check (:mod:`.endpoints`, :mod:`.models`, :mod:`.gpus`, :mod:`.verl_env`,
:mod:`.data_files`), :mod:`.run` (plan and run) and :mod:`.report` (what the CLI prints).
"""

from __future__ import annotations

from codethinker.preflight.checks import CheckResult, PlannedCheck, is_hub_id
from codethinker.preflight.gpus import (
    KNOWN_PARAMETERS,
    MemoryNeed,
    ModelSize,
    PolicySize,
    gpu_memory_need,
    model_size_from_config,
    parameters_from_config,
    policy_parameters,
    policy_size,
)
from codethinker.preflight.probes import GPUInfo, ProbeError, Probes
from codethinker.preflight.probes import _http as _http
from codethinker.preflight.report import format_report, params_table
from codethinker.preflight.run import PreflightReport, plan_checks, run_preflight
from codethinker.preflight.verl_env import verl_python

__all__ = [
    "KNOWN_PARAMETERS",
    "CheckResult",
    "GPUInfo",
    "MemoryNeed",
    "ModelSize",
    "PlannedCheck",
    "PolicySize",
    "PreflightReport",
    "ProbeError",
    "Probes",
    "format_report",
    "gpu_memory_need",
    "is_hub_id",
    "model_size_from_config",
    "parameters_from_config",
    "params_table",
    "plan_checks",
    "policy_parameters",
    "policy_size",
    "run_preflight",
    "verl_python",
]
