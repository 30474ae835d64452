"""Preflight's data checks: every source file the ``fetch``/``eval_truth`` stages read is in the mirror
or the download cache, or its pinned public URL answers a ``HEAD`` request; LiveCodeBench's hub dataset
(a warning only: the stages skip it when the hub is unreachable); the tokenizer mirror when
``bootstrap.tokenizer`` is ``mirror``."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from codethinker.config.data import EvalTruthConfig, FetchConfig
from codethinker.config.loader import BaseConfig, ParamsFile
from codethinker.preflight.checks import CheckResult, PlannedCheck, _local, section, trainer_section
from codethinker.preflight.probes import Probes

LIVECODEBENCH_REPO = "livecodebench/execution-v2"  # codethinker.data.sources.LIVECODEBENCH_REPO


def _source_files() -> dict[str, tuple[str, str]]:
    """``key -> (mirror path, public URL)`` of every source file (:data:`codethinker.data.sources.SOURCES`)."""
    from codethinker.data.sources import SOURCES

    return {k: (s.mirror_path, s.url) for k, s in SOURCES.items()}


def _plan_data(params: ParamsFile, root: Path) -> list[PlannedCheck]:
    sources = _source_files()
    wanted: dict[str, tuple[str, bool, set[str]]] = {}  # key -> (cache dir, download allowed, stages)
    lcb_stages: set[str] = set()
    for cls in (FetchConfig, EvalTruthConfig):
        sec = section(params, cls)
        if sec is None:
            continue
        stage = cls.SECTION
        keys = [f"leetcode/{n}" for n in sec.leetcode] if isinstance(sec, FetchConfig) else []
        keys += [b for b in sec.benchmarks if b in sources]
        if "livecodebench" in sec.benchmarks:
            lcb_stages.add(stage)
        for key in keys:
            users = wanted.setdefault(key, (sec.cache_dir or "data/downloads", sec.download, set()))[2]
            users.add(stage)
    base = params.base
    checks: list[PlannedCheck] = []
    if not wanted:
        checks.append(PlannedCheck("data files", frozenset(), None, "not needed: no fetch or eval_truth stage"))
    else:
        all_stages = frozenset(s for _, _, users in wanted.values() for s in users)

        def probe(p: Probes) -> CheckResult:
            return _check_data(p, root, base, wanted, sources)

        checks.append(PlannedCheck("data files", all_stages, probe))
    if lcb_stages:

        def lcb(p: Probes) -> CheckResult:
            return _check_livecodebench(p)

        checks.append(PlannedCheck(f"LiveCodeBench ({LIVECODEBENCH_REPO})", frozenset(lcb_stages), lcb))
    bootstrap = trainer_section(params, "bootstrap")
    if bootstrap is not None and bootstrap.tokenizer == "mirror":

        def tok(p: Probes) -> CheckResult:
            raw = p.env.get("CODETHINKER_TOKENIZER") or str(base.tokenizer_mirror or "")
            folder = _local(raw, root) if raw else None
            if folder is not None and ((folder / "vocab.json").is_file() or (folder / "tokenizer.json").is_file()):
                return CheckResult(
                    "tokenizer mirror", "pass", f"tokenizer files in {raw} (bootstrap.tokenizer: mirror)"
                )
            return CheckResult(
                "tokenizer mirror",
                "fail",
                f"bootstrap.tokenizer is mirror, but {raw or 'base.tokenizer_mirror (unset)'} holds no tokenizer files",
                "set base.tokenizer_mirror (or $CODETHINKER_TOKENIZER) to a folder with the Qwen2 tokenizer "
                "(tokenizer.json or vocab.json + merges.txt)",
            )

        checks.append(PlannedCheck("tokenizer mirror", frozenset({"bootstrap"}), tok))
    return checks


def _check_data(
    p: Probes,
    root: Path,
    base: BaseConfig,
    wanted: Mapping[str, tuple[str, bool, set[str]]],
    sources: Mapping[str, tuple[str, str]],
) -> CheckResult:
    raw = p.env.get("CODETHINKER_MIRROR") or base.mirror
    mirror = _local(str(raw), root) if raw else None
    mirror = mirror if mirror is not None and mirror.is_dir() else None
    in_mirror, cached, remote, missing = [], [], [], []
    for key, (cache_dir, download, _) in wanted.items():
        rel, url = sources[key]
        if mirror is not None and (mirror / rel).is_file():
            in_mirror.append(key)
        elif (_local(cache_dir, root) / rel).is_file():
            cached.append(key)
        elif not download:
            missing.append(f"{key} (not in the mirror, downloads are off)")
        else:
            try:
                status, _ = p.http("HEAD", url, p.timeout_s, {})
            except OSError as exc:
                missing.append(
                    f"{key} ({urllib.parse.urlsplit(url).netloc} unreachable: {getattr(exc, 'reason', exc)})"
                )
                continue
            (remote if status == 200 else missing).append(key if status == 200 else f"{key} (HTTP {status})")
    where = f"the mirror {raw}" if mirror is not None else f"no mirror ({raw or 'base.mirror unset'} is absent)"
    parts = [f"{len(in_mirror)} in {where}"]
    parts += [f"{len(cached)} in the download cache"] if cached else []
    parts += [f"{len(remote)} to download (URLs answer)"] if remote else []
    summary = f"{len(wanted)} source files: " + ", ".join(parts)
    if missing:
        return CheckResult(
            "data files",
            "fail",
            f"{summary}; missing: " + "; ".join(missing),
            "set base.mirror (or $CODETHINKER_MIRROR) to a folder holding the files (PROVENANCE.md), "
            "or run where their public URLs are reachable",
        )
    return CheckResult("data files", "pass", summary + " (checksums are verified by fetch)")


def _check_livecodebench(p: Probes) -> CheckResult:
    name = f"LiveCodeBench ({LIVECODEBENCH_REPO})"
    skipped = "the stages skip LiveCodeBench(-O) and say so"
    fix = "run where the Hugging Face hub is reachable to include it"
    if p.offline():
        return CheckResult(name, "warn", f"HF_HUB_OFFLINE is set: {skipped}", fix + " (unset HF_HUB_OFFLINE)")
    endpoint = p.hub_endpoint()
    try:
        status, _ = p.http("HEAD", f"{endpoint}/api/datasets/{LIVECODEBENCH_REPO}", p.timeout_s, {})
    except OSError as exc:
        return CheckResult(
            name, "warn", f"the hub {endpoint} is unreachable ({getattr(exc, 'reason', exc)}): {skipped}", fix
        )
    if status != 200:
        return CheckResult(name, "warn", f"the hub {endpoint} answered HTTP {status}: {skipped}", fix)
    return CheckResult(name, "pass", f"on the hub {endpoint}")
