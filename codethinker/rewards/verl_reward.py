"""verl's entry point for the project's reward: ``custom_reward_function.path`` = this file,
``custom_reward_function.name`` = ``compute_score``.

verl loads this file by path (``importlib``), on every reward worker of the cluster, so it makes
the project importable from its own location before importing the rewards; the signature is
verl's ``compute_score(data_source, solution_str, ground_truth, extra_info)``.

The run's reward travels as keyword arguments, which verl binds to every call from the run's config,
``reward.custom_reward_function.reward_kwargs`` (verl 0.9.1's ``get_custom_reward_fn`` passes
``reward_kwargs`` as keyword arguments; the launcher writes them,
:func:`codethinker.training.grpo_verl.reward_kwargs`): ``reward`` (``crm`` | ``orm`` | ``whitebox``, or a
code-generation kind: ``codegen_outcome`` | ``reflexicoder`` | ``cg_grpo`` | ``cg_grpo_ungated`` |
``recode_outcome``, :mod:`codethinker.rewards.switch`), ``crm`` (a dict of
:class:`codethinker.rewards.crm.CRMConfig` fields, the ablation switches), ``whitebox`` (``a``, ``k``),
and for a code-generation kind ``reflexicoder``, ``judge`` and ``reward_model`` (the CRPL reward model's
absolute path, which ``cg_grpo`` / ``cg_grpo_ungated`` score with). The config travels with the job to
every Ray worker, unlike an environment variable of the launching shell. Without them, a per-sample
``extra_info["reward"]`` / ``["crm"]`` / ``["whitebox"]`` is used, else the full CRM.

>>> compute_score("leetcode_reasoning", "junk", truth_json, reward="crm", crm={"orm": False})["score"]  # doctest: +SKIP
0.0
>>> compute_score("leetcode_reasoning", vanilla_answer, truth_json, reward="orm")["score"]  # doctest: +SKIP
2.0
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from codethinker.rewards import switch as _switch  # noqa: E402

__all__ = ["compute_score"]


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict | None = None,
    crm: Mapping[str, Any] | None = None,
    reward: str | None = None,
    whitebox: Mapping[str, Any] | None = None,
    reflexicoder: Mapping[str, Any] | None = None,
    judge: Mapping[str, Any] | None = None,
    reward_model: str | None = None,
    task: str | None = None,
    **_: Any,
) -> dict[str, Any]:
    """The run's reward and its parts (``score``, ``r_proc``, ``r_res``, ``fmt``, ``rcs``, ...).

    ``reward``, ``crm``, ``whitebox``: the run's reward kind and settings (from verl's
    ``reward_kwargs``); they take precedence over the same keys of ``extra_info``. ``reflexicoder``,
    ``judge``, ``reward_model``: a code-generation kind's settings (:mod:`codethinker.rewards.codegen_switch`).
    ``task`` (the launcher always binds it; else ``extra_info["task"]``): the task whose reward this is
    (:mod:`codethinker.tasks`, a user's own included), scored through the task contract; without one, the kind
    picks its reward module.
    """
    name = task or (extra_info or {}).get("task")
    if name is not None:
        from codethinker.tasks import get_task, score_one

        settings = {"crm": crm, "whitebox": whitebox, "reflexicoder": reflexicoder, "judge": judge}
        settings["reward_model"] = reward_model
        return score_one(get_task(name), solution_str, ground_truth, reward, settings, dict(extra_info or {}))
    return _switch.compute_score(
        data_source, solution_str, ground_truth, extra_info, reward, crm, whitebox, reflexicoder, judge, reward_model
    )
