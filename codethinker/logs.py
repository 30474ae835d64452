"""How loud a stage is: the project's own lines (a stage's start, progress bars, its result) always; the
libraries it drives (vLLM, TRL, transformers, MLflow, Prefect) at WARNING unless ``CODETHINKER_LOG`` is
``info`` or ``debug``; training curves go to MLflow and the DVC plot CSVs, not to stdout per step.

``quiet_libraries()`` runs before a stage imports any of them (``codethinker.ops.stage.stage_main``): vLLM
and transformers read their levels from the environment when they are imported.

>>> import os; os.environ.pop("CODETHINKER_LOG", None); verbose()
False
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

__all__ = ["LEVEL_ENV", "LIBRARIES", "drop_library_noise", "quiet_libraries", "verbose"]

LEVEL_ENV = "CODETHINKER_LOG"
LIBRARIES = (
    "vllm",
    "transformers",
    "trl",
    "accelerate",
    "peft",
    "datasets",
    "sentence_transformers",
    "mlflow",
    "alembic",
    "prefect",
    "openai",
    "httpx",
    "httpx2",
    "urllib3",
    "torch",
)
# warnings that say nothing a user can act on: TRL's vLLM version range (the CPU build pins its own),
# vLLM's and torch's deprecations inside their own code, Triton without a CPU backend
NOISE = (
    r"TRL currently supports vLLM versions",
    r"`torch\.distributed\.reduce_op` is deprecated",
)


# WARNING lines a library repeats that ask nothing of the user: vLLM's weight reload (every GRPO step) names
# the rotary embedding (no weights) and the LM head tied to the embeddings; its CPU worker cannot set threads
REPEATED = {
    "vllm": (
        "RotaryEmbedding: Failed to load weights",
        "ParallelLMHead: Failed to load weights",
        "doesn't allow to use `torch.set_num_threads`",
        # and what every engine start says about the CPU build's choices (about 10 lines a start): the
        # project's engine settings are deliberate and checked against transformers (tests/engines)
        "is not found in LD_PRELOAD",
        "The global random seed is set to",
        "Reset SSM cache type",
        "Triton is not installed",
        "Triton is installed, but doesn't include CPU backend",
        "Unknown vLLM environment variable detected: VLLM_DIST_IDENT",  # the CPU worker sets it itself
        "does not officially support disabling chunked prefill",
        "Model Runner V2 requires Triton",
        "Inductor compilation was disabled",
        "Enforce eager set",
        "is already registered. Overwriting",
    ),
}


class _Drop(logging.Filter):
    def __init__(self, patterns: tuple[str, ...]) -> None:
        super().__init__()
        self.patterns = patterns

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(p in message for p in self.patterns)


def drop_library_noise() -> None:
    """Drop the :data:`REPEATED` lines on the libraries' own handlers (a library that configures its logging
    at import, as vLLM does, needs this after the import); nothing when :func:`verbose`. Idempotent."""
    if verbose():
        return
    for name, patterns in REPEATED.items():
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, _Drop) for f in handler.filters):
                handler.addFilter(_Drop(patterns))


class _VLLMHandler(logging.StreamHandler):
    """vLLM's warnings on stderr, less :data:`REPEATED` (installed when vLLM's own logging is off)."""


def _vllm_handler() -> None:
    logger = logging.getLogger("vllm")
    if any(isinstance(h, _VLLMHandler) for h in logger.handlers):
        return
    handler = _VLLMHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_Drop(REPEATED["vllm"]))
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False


def verbose() -> bool:
    """``CODETHINKER_LOG`` asks for the libraries' own INFO/DEBUG lines."""
    return os.environ.get(LEVEL_ENV, "").strip().lower() in ("info", "debug", "verbose")


def quiet_libraries() -> None:
    """Set the libraries' levels to WARNING (nothing when :func:`verbose`); idempotent. An environment
    variable the user set (``VLLM_LOGGING_LEVEL``, ``TRANSFORMERS_VERBOSITY``) is kept."""
    if verbose():
        os.environ.setdefault("VLLM_LOGGING_LEVEL", os.environ[LEVEL_ENV].strip().upper().replace("VERBOSE", "DEBUG"))
        return
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    # vLLM's handler would appear only while its engine starts, after the lines a start prints: ours, filtered,
    # from the start; also in a stage that inherits the 0 from `codethinker repro`, which quiets itself
    # (a user's VLLM_CONFIGURE_LOGGING=1 keeps vLLM's own)
    if os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0") == "0":
        _vllm_handler()
    # torch's C++ warnings print straight to stderr; the only one a stage meets is the NUMA policy vLLM's CPU
    # worker picks at every engine start (read when torch is imported: set before it)
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # MLflow sets its level at import (INFO otherwise)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "warning")  # above WARN, the Trainer turns its bar off
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # per-file download bars, not the stage's own
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")  # TRL's tokenizing/truncating passes (seconds)
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
    for pattern in NOISE:
        warnings.filterwarnings("ignore", message=pattern)
