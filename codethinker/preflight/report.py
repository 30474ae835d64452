"""What ``codethinker preflight`` prints: the report, one line per check (:func:`format_report`), and
the params resolved for a profile, one line each (:func:`params_table`, ``--show-params``)."""

from __future__ import annotations

import json
import os

from codethinker.params import flatten, load_params, resolve_params
from codethinker.preflight.run import PreflightReport

__all__ = ["format_report", "params_table"]


def _marks(encoding: str | None) -> dict[str, str]:
    fancy = {"pass": "✓", "fail": "✗", "warn": "!", "skip": "-"}
    try:
        "".join(fancy.values()).encode(encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP"}
    return fancy


def format_report(report: PreflightReport, encoding: str | None = "utf-8") -> str:
    """One line per check (✓ pass, ✗ fail, ! warning, - not needed; PASS/FAIL/... where ``encoding``
    cannot write the marks), the fix under each failure or warning, and a summary line."""
    marks = _marks(encoding)
    lines = [f"preflight: profile {report.profile} ({report.params_path})"]
    for r in report.results:
        lines.append(f"{marks[r.status]} {r.name}: {r.detail}")
        if r.fix and r.status in ("fail", "warn"):
            lines.append(f"    to do: {r.fix}")
    counts = {s: sum(r.status == s for r in report.results) for s in ("pass", "fail", "warn", "skip")}
    tally = f"{counts['pass']} passed, {counts['fail']} failed, {counts['warn']} warnings, {counts['skip']} not needed"
    verdict = "ready" if report.ok else f"NOT ready: fix the {marks['fail']} line(s) above"
    lines.append(f"{len(report.results)} checks: {tally}; {verdict}")
    return "\n".join(lines)


def params_table(params_path: str | os.PathLike[str] = "params.yaml", profile: str | None = None) -> str:
    """The params resolved for ``profile``, one ``key = value`` line each (values as JSON)."""
    params = resolve_params(load_params(params_path), profile)
    flat = flatten(params)
    width = min(max((len(k) for k in flat), default=0), 44)
    return "\n".join(f"{k:<{width}} = {json.dumps(v, default=str)}" for k, v in flat.items())
