"""What goes through DVC itself: the stage graph, ``-S`` parameter overrides, ``dvc exp show``,
a stage's ``dvc status --json`` and the processes DVC's lock file records.

The graph is read with DVC's ``Repo`` (``repo.index``): DVC is what ``dvc repro`` runs, so the
flow must see the stages, ``foreach`` items, interpolated paths, ``.dvc`` data sources and nested
``dvc.yaml`` files exactly as DVC resolves them; a second reader would drift from it. Overrides use
DVC's own ``dvc exp run -S`` code (:mod:`dvc.utils.hydra`: Hydra's grammar, comments kept).
DVC is imported lazily: stages never pay for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codethinker.errors import UsageError

__all__ = [
    "StageSpec",
    "apply_params_overrides",
    "dvc_command",
    "exp_show_json",
    "read_graph",
    "rwlock_holders",
    "stage_up_to_date",
]


@dataclass(frozen=True)
class StageSpec:
    """One DVC stage as the flow sees it; paths are relative to the project root."""

    name: str  # DVC addressing: `name`, `name@key` (foreach) or `sub/dvc.yaml:name`
    cmd: str
    upstream: tuple[str, ...]
    outs: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    plots: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict, compare=False)  # the stage's `meta:` marks

    @property
    def section(self) -> str:
        """The params.yaml section of the stage (stage name = module name)."""
        return self.name.rsplit(":", 1)[-1].split("@")[0]


def read_graph(root: str | os.PathLike[str] = ".") -> list[StageSpec]:
    """The pipeline stages in an order that respects dependencies (ties: dvc.yaml order)."""
    import networkx as nx
    from dvc.repo import Repo
    from dvc.stage import PipelineStage

    root_p = Path(root).resolve()
    # DVC addresses stages relative to the working directory: read from the root
    with contextlib.chdir(root_p), Repo(str(root_p)) as repo:
        graph = repo.index.graph  # edges: stage -> the stage that makes one of its deps
        position = {id(s): i for i, s in enumerate(repo.index.stages)}

        def upstream(stage: Any, seen: set[int]) -> set[str]:
            found: set[str] = set()
            for dep in graph.successors(stage):
                if isinstance(dep, PipelineStage):
                    found.add(dep.addressing)
                elif id(dep) not in seen:  # a .dvc data source: look through it
                    seen.add(id(dep))
                    found |= upstream(dep, seen)
            return found

        def rel(out: Any) -> str:
            return os.path.relpath(out.fs_path, root_p)

        order = nx.lexicographical_topological_sort(
            graph.reverse(copy=True), key=lambda s: f"{position.get(id(s), 10**8):010d}"
        )
        return [
            StageSpec(
                name=s.addressing,
                cmd=s.cmd if isinstance(s.cmd, str) else " && ".join(s.cmd),
                upstream=tuple(sorted(upstream(s, set()))),
                outs=tuple(rel(o) for o in s.outs),
                metrics=tuple(rel(o) for o in s.outs if o.metric),
                plots=tuple(rel(o) for o in s.outs if o.plot),
                meta=dict(s.meta) if isinstance(s.meta, dict) else {},
            )
            for s in order
            if isinstance(s, PipelineStage)
        ]


def apply_params_overrides(params_file: str | os.PathLike[str], items: list[str]) -> None:
    """Write ``section.key=value`` overrides into ``params_file`` as ``dvc exp run -S`` does
    (``ValueError`` naming the overrides when DVC rejects one)."""
    from dvc.exceptions import InvalidArgumentError
    from dvc.utils.hydra import apply_overrides as dvc_apply_overrides

    try:
        dvc_apply_overrides(Path(params_file), items)
    except InvalidArgumentError as exc:
        raise ValueError(f"invalid params override in {items}: {exc.__cause__ or exc}") from None


def dvc_command() -> str:
    """``dvc`` beside the running interpreter (the project's venv, also when it is not activated),
    else on ``PATH``; a :class:`~codethinker.errors.UsageError` that says how to get it otherwise."""
    import shutil

    here = Path(sys.executable).parent / "dvc"
    found = str(here) if here.is_file() else shutil.which("dvc")
    if not found:
        raise UsageError("--exps auto runs `dvc exp show --json`, and no `dvc` was found (make install)")
    return found


def exp_show_json(root: str | os.PathLike[str] = ".") -> str:
    """The output of ``dvc exp show --json`` here, each rev with its detail reports (:func:`with_detail`);
    a :class:`~codethinker.errors.UsageError` when it fails."""
    proc = subprocess.run(
        [dvc_command(), "exp", "show", "--json"], cwd=root, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise UsageError(f"`dvc exp show --json` failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.dumps(with_detail(json.loads(proc.stdout or "[]"), root))


DETAIL_DIR = "metrics"  # the stages' detail reports; DVC lists only metrics/headline/ (codethinker.ops.views)


def _git_files(root: Path, rev: str) -> dict[str, Any]:
    """The JSON files under ``metrics/`` (not ``metrics/headline/``) at commit ``rev``, parsed."""
    ls = subprocess.run(
        ["git", "-C", str(root), "ls-tree", "-r", "--name-only", rev, "--", DETAIL_DIR],
        capture_output=True,
        text=True,
        check=False,
    )
    names = [n for n in ls.stdout.splitlines() if n.endswith(".json") and not n.startswith(f"{DETAIL_DIR}/headline/")]
    if ls.returncode != 0 or not names:
        return {}
    cat = subprocess.run(
        ["git", "-C", str(root), "cat-file", "--batch"],
        input="".join(f"{rev}:{n}\n" for n in names).encode(),
        capture_output=True,
        check=False,
    )
    out, buf = {}, cat.stdout
    for n in names:  # "<sha> blob <size>\n<content>\n" per object
        head, _, buf = buf.partition(b"\n")
        parts = head.split()
        if len(parts) != 3 or parts[1] != b"blob":  # "<name> missing"
            continue
        size = int(parts[2])
        body, buf = buf[:size], buf[size + 1 :]
        with contextlib.suppress(ValueError):
            out[n] = json.loads(body)
    return out


def _disk_files(root: Path) -> dict[str, Any]:
    out = {}
    for f in sorted((root / DETAIL_DIR).rglob("*.json")):
        rel = f.relative_to(root).as_posix()
        if not rel.startswith(f"{DETAIL_DIR}/headline/"):
            with contextlib.suppress(OSError, ValueError):
                out[rel] = json.loads(f.read_text())
    return out


def with_detail(exp_show: list[dict[str, Any]], root: str | os.PathLike[str] = ".") -> list[dict[str, Any]]:
    """``dvc exp show --json`` with each rev's detail reports (``metrics/**/*.json`` outside
    ``metrics/headline/``) added under ``data.metrics`` as DVC lists a metrics file (``{"data": ...}``):
    read from the rev's commit (an experiment's commit holds the git-tracked reports it wrote), the
    workspace's from disk. What DVC already lists is kept. The reports (``codethinker report --exps``)
    read the detail; DVC itself lists only the headline."""
    base = Path(root)

    def fill(rev: dict[str, Any]) -> None:
        if rev.get("data") is None:
            rev["data"] = {}
        data = rev["data"]
        if not isinstance(data, dict):
            return
        sha = rev.get("rev") or data.get("rev")
        files = _disk_files(base) if sha == "workspace" else _git_files(base, sha) if sha else {}
        metrics = data["metrics"] = data.get("metrics") or {}
        for path, value in files.items():
            metrics.setdefault(path, {"data": value})

    for top in exp_show:
        fill(top)
        for exp in top.get("experiments") or []:
            for rev in exp.get("revs") or []:
                fill(rev)
    return exp_show


def _overlaps(a: str, b: str) -> bool:
    """Whether one path is the other or under it (DVC's rule for its locks)."""
    pa, pb = Path(a).parts, Path(b).parts
    return pa[: len(pb)] == pb or pb[: len(pa)] == pa


def rwlock_holders(root: str | os.PathLike[str], reads: list[str], writes: list[str]) -> set[int]:
    """The PIDs DVC's lock file ``.dvc/tmp/rwlock`` records as holding a lock that keeps a stage
    from reading ``reads`` and writing ``writes``: a writer of any of them, a reader of any of
    ``writes``. The file is JSON, ``{"write": {path: {"pid", "cmd"}}, "read": {path: [{"pid", "cmd"}]}}``
    (absolute paths); absent, unreadable or half written: no holders. Whether a PID still runs is
    the caller's question (:func:`codethinker.ops.procs.pid_alive`)."""
    base = Path(root).resolve()
    wanted_r = [str(base / p) for p in reads]
    wanted_w = [str(base / p) for p in writes]
    try:
        lock = json.loads((base / ".dvc" / "tmp" / "rwlock").read_text())
    except (OSError, ValueError):
        return set()
    if not isinstance(lock, dict):
        return set()
    holders: set[int] = set()
    for mode, against in (("write", wanted_r + wanted_w), ("read", wanted_w)):
        entries = lock.get(mode)
        for path, infos in entries.items() if isinstance(entries, dict) else ():
            if not any(_overlaps(str(path), w) for w in against):
                continue
            for info in infos if isinstance(infos, list) else [infos]:
                if isinstance(info, dict) and isinstance(info.get("pid"), int):
                    holders.add(info["pid"])
    return holders


def stage_up_to_date(stage: str, root: str | os.PathLike[str], env: dict[str, str] | None = None) -> bool | None:
    """Whether ``dvc status --json <stage>`` finds ``stage`` up to date (``{}``: ``dvc repro
    --single-item`` would skip it); None when the command fails or its output is no JSON object."""
    cmd = [sys.executable, "-m", "dvc", "--wait-for-lock", "status", "--json", stage]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return None
    try:
        data = json.loads(proc.stdout or "null")
    except ValueError:
        return None
    return data == {} if isinstance(data, dict) else None
