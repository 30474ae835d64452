"""verl's entry point for the project's reward: ``custom_reward_function.path`` = this file,
``custom_reward_function.name`` = ``compute_score``.

verl loads this file by path (``importlib``), on every reward worker of the cluster, so it makes
the project importable from its own location before importing the CRM reward; the signature is
verl's ``compute_score(data_source, solution_str, ground_truth, extra_info)``.

Ablation switches: ``crm`` (a dict of :class:`codethinker.rewards.crm.CRMConfig` fields), which verl
binds to every call from the run's config, ``reward.custom_reward_function.reward_kwargs.crm``
(verl 0.9.1's ``get_custom_reward_fn`` passes ``reward_kwargs`` as keyword arguments; the launcher
writes them, :func:`codethinker.training.grpo_verl.crm_reward_kwargs`). The config travels with the
job to every Ray worker, unlike an environment variable of the launching shell. Without it, a
per-sample ``extra_info["crm"]`` is used, else the full CRM.

>>> compute_score("leetcode_reasoning", "junk", truth_json, crm={"orm": False})["score"]  # doctest: +SKIP
0.0
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from codethinker.rewards import crm as _crm  # noqa: E402

__all__ = ["compute_score"]


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict | None = None,
    crm: Mapping[str, Any] | None = None,
    **_: Any,
) -> dict[str, Any]:
    """CRM score and its parts (``score``, ``r_proc``, ``r_res``, ``fmt``, ``rcs``, ...).

    ``crm``: the run's switches (from verl's ``reward_kwargs``); they take precedence over
    ``extra_info["crm"]``.
    """
    info = dict(extra_info or {})
    if crm is not None:
        info["crm"] = dict(crm)
    return _crm.compute_score(data_source, solution_str, ground_truth, info)
