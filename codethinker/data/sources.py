"""Source data: LeetCodeDataset train splits and the benchmark programs of the similarity filter.

Every file comes from the local mirror folder (``base.mirror`` or ``$CODETHINKER_MIRROR``,
read in place) or, where the mirror lacks it, from its public URL at a pinned commit
(downloaded once into a cache folder). Either way its sha256 must match the figure recorded
in the mirror's PROVENANCE.md. LiveCodeBench (``livecodebench/execution-v2``) lives only on
the Hugging Face hub and is skipped with a message when the hub cannot be reached.

>>> SOURCES["leetcode/v0.2.0-train"].mirror_path
'leetcodedataset/LeetCodeDataset-v0.2.0-train.jsonl.gz'
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codethinker.data.io import RecordError, atomic_write, iter_jsonl

__all__ = [
    "SOURCES",
    "SourceError",
    "SourceFile",
    "load_benchmarks",
    "load_leetcode",
    "load_livecodebench",
    "resolve",
    "sha256_file",
]

_LCD = "https://raw.githubusercontent.com/newfacade/LeetCodeDataset/182cd19fd53161efd70a1ef074fe1056b659bfa3"
_CRUX = "https://raw.githubusercontent.com/facebookresearch/cruxeval/190faf16d175b5847b0af05d937872b1fb395942"
_REVAL = "https://raw.githubusercontent.com/r-eval/REval/2f148b913deb4ae0e0ce41f0245ef35054ede8d6"
LIVECODEBENCH_REPO = "livecodebench/execution-v2"


class SourceError(RuntimeError):
    """A source file is missing, unreachable or has the wrong checksum."""


@dataclass(frozen=True)
class SourceFile:
    key: str
    mirror_path: str  # relative to the mirror folder
    url: str
    sha256: str


def _lcd(version: str, split: str, sha: str) -> SourceFile:
    name = f"LeetCodeDataset-{version}-{split}.jsonl.gz"
    return SourceFile(f"leetcode/{version}-{split}", f"leetcodedataset/{name}", f"{_LCD}/data/{name}", sha)


SOURCES: dict[str, SourceFile] = {
    s.key: s
    for s in [
        _lcd("v0.1.0", "train", "38fb21c4277c59937cfbe67ef42597a485f9428afa53695827d50fc8c3e58623"),
        _lcd("v0.2.0", "train", "7c3e4221572920a9e6c822083a327d2238ea70b5b3ba18459bee6855ef93e2c7"),
        SourceFile(
            "cruxeval",
            "cruxeval/cruxeval.jsonl",
            f"{_CRUX}/data/cruxeval.jsonl",
            "8368b81047dc5014e4caf5a2f97604eff7644e0ecd7415e3ceeb184bbc2e0c96",
        ),
        SourceFile(
            "reval",
            "reval/DREval_data.jsonl",
            f"{_REVAL}/data/DREval_data.jsonl",
            "b8e72ef344cd575b220363e7a361e892ef2bdfcee1cab79f702d60e255844965",
        ),
    ]
}


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _download(url: str, dest: Path, timeout_s: float) -> None:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp, atomic_write(dest, "wb") as out:
        shutil.copyfileobj(resp, out)


def resolve(
    src: SourceFile,
    mirror: Path | None,
    cache_dir: str | os.PathLike[str],
    *,
    download: bool = True,
    timeout_s: float = 60.0,
    fetcher: Callable[[str, Path, float], None] = _download,
) -> tuple[Path, str]:
    """The verified local path of ``src`` and where it came from (``mirror``, ``cache``, ``download``)."""
    if mirror is not None and (mirror / src.mirror_path).is_file():
        path, origin = mirror / src.mirror_path, "mirror"
    else:
        path = Path(cache_dir) / src.mirror_path
        origin = "cache"
        if not path.is_file():
            where = f"the mirror {mirror}" if mirror is not None else "no mirror (base.mirror is unset or absent)"
            if not download:
                raise SourceError(
                    f"{src.key}: {src.mirror_path} is not in {where} and downloads are off; set base.mirror "
                    f"(or $CODETHINKER_MIRROR) to a folder holding {src.mirror_path}, or set fetch.download: true"
                )
            try:
                fetcher(src.url, path, timeout_s)
            except OSError as exc:
                raise SourceError(
                    f"{src.key}: {src.mirror_path} is not in {where} and the download from {src.url} failed "
                    f"({exc}); set base.mirror (or $CODETHINKER_MIRROR) to a folder holding {src.mirror_path}"
                ) from None
            origin = "download"
    got = sha256_file(path)
    if got != src.sha256:
        raise SourceError(
            f"{src.key}: {path} has sha256 {got}, expected {src.sha256} (PROVENANCE.md); "
            "the file is corrupt or another version: replace it"
        )
    return path, origin


_LCD_FIELDS: dict[str, Any] = {
    "task_id": str,
    "prompt": str,
    "completion": str,
    "entry_point": str,
    "input_output": list,
    "meta": dict,
}


def load_leetcode(paths: Iterable[tuple[str, Path]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Merge train splits ``(version, path)`` (later versions win on a shared task_id).

    Returns problem records and counts: ``rows`` read, ``duplicates`` (task_ids seen before),
    ``problems`` kept.
    """
    merged: dict[str, dict[str, Any]] = {}
    rows = dups = 0
    for version, path in paths:
        for i, rec in enumerate(iter_jsonl(path, _LCD_FIELDS), start=1):
            rows += 1
            for j, io in enumerate(rec["input_output"]):
                if not (isinstance(io, dict) and isinstance(io.get("input"), str) and "output" in io):
                    raise RecordError(path, i, f"input_output[{j}]", "expected {'input': str, 'output': ...}")
            tid = rec["task_id"]
            if tid in merged:
                dups += 1
            merged[tid] = {
                "task_id": tid,
                "version": version,
                "question_id": rec["meta"].get("question_id"),
                "difficulty": rec["meta"].get("difficulty"),
                "entry_point": rec["entry_point"],
                "preamble": rec["prompt"],
                "completion": rec["completion"],
                "input_output": [{"input": io["input"], "output": str(io["output"])} for io in rec["input_output"]],
            }
    problems = sorted(merged.values(), key=lambda r: (r["question_id"] or 0, r["task_id"]))
    return problems, {"rows": rows, "duplicates": dups, "problems": len(problems)}


def load_benchmarks(cruxeval: Path | None, reval: Path | None) -> list[dict[str, Any]]:
    """Benchmark programs as ``{"benchmark", "id", "code"}`` records."""
    out: list[dict[str, Any]] = []
    if cruxeval is not None:
        for rec in iter_jsonl(cruxeval, {"id": str, "code": str}):
            out.append({"benchmark": "cruxeval", "id": rec["id"], "code": rec["code"]})
    if reval is not None:
        for rec in iter_jsonl(reval, {"task_id": str, "code": str}):
            out.append({"benchmark": "reval", "id": rec["task_id"], "code": rec["code"]})
    return out


def load_livecodebench(repo: str = LIVECODEBENCH_REPO) -> tuple[list[dict[str, Any]], str | None]:
    """LiveCodeBench execution programs from the hub, or ``([], why)`` when the hub is unreachable."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return [], f"skipped {repo}: HF_HUB_OFFLINE is set (unset it on a machine that reaches the hub)"
    endpoint = urllib.parse.urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:  # fail fast where the hub's name does not even resolve (datasets would retry for ~25 s)
        socket.getaddrinfo(endpoint.hostname or "huggingface.co", endpoint.port or 443)
    except OSError as exc:
        return [], f"skipped {repo}: the hub {endpoint.geturl()} is unreachable ({exc})"
    try:
        import datasets

        ds = datasets.load_dataset(repo, split="test")
    except Exception as exc:  # any hub/network failure means "not available here"
        return [], f"skipped {repo}: the hub is unreachable or the dataset failed to load ({type(exc).__name__})"
    programs: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(ds):
        code = row.get("code")
        if not isinstance(code, str):
            raise RecordError(repo, i + 1, "code", "missing or not a string")
        programs.setdefault(code, {"benchmark": "livecodebench", "id": str(row.get("id", i)), "code": code})
    return list(programs.values()), None
