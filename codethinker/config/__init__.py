"""Typed params: one frozen dataclass per params.yaml section, loaded one way (:mod:`.loader`).

The sections' classes live beside what they configure: :mod:`~codethinker.config.data` (the data
pipeline and the benchmarks' truths), :mod:`~codethinker.config.bootstrap`, :mod:`~codethinker.config.sft`,
:mod:`~codethinker.config.grpo` (grpo, train_eval), :mod:`~codethinker.config.evaluate` and
:mod:`~codethinker.config.generalize`. This package imports none of them: a stage imports (and DVC
hashes) only the library code of its own section.
"""

from codethinker.config.loader import (
    POLICY,
    BaseConfig,
    ConfigError,
    ModelConfig,
    ParamsFile,
    Section,
    as_dict,
    fill,
    from_mapping,
    inline,
    load_config,
    policy_model,
)

__all__ = [
    "POLICY",
    "BaseConfig",
    "ConfigError",
    "ModelConfig",
    "ParamsFile",
    "Section",
    "as_dict",
    "fill",
    "from_mapping",
    "inline",
    "load_config",
    "policy_model",
]
