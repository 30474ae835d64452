"""verl's entry point for the project's reward: ``custom_reward_function.path`` = this file,
``custom_reward_function.name`` = ``compute_score``.

verl loads this file by path (``importlib``), on every reward worker of the cluster, so it makes
the project importable from its own location before importing the CRM reward; the signature is
verl's ``compute_score(data_source, solution_str, ground_truth, extra_info)``. Ablation switches
come from ``extra_info["crm"]`` (per sample) or ``$CODETHINKER_CRM`` (a JSON object, for the run).

>>> compute_score("leetcode_reasoning", "junk", truth_json)["score"]  # doctest: +SKIP
0.0
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from codethinker.rewards import crm as _crm  # noqa: E402

__all__ = ["compute_score"]


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **_: Any
) -> dict[str, Any]:
    """CRM score and its parts (``score``, ``r_proc``, ``r_res``, ``fmt``, ``rcs``, ...)."""
    info = dict(extra_info or {})
    if "crm" not in info and os.environ.get("CODETHINKER_CRM"):
        info["crm"] = json.loads(os.environ["CODETHINKER_CRM"])
    return _crm.compute_score(data_source, solution_str, ground_truth, info)
