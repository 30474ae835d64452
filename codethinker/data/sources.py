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
from codethinker.errors import CodethinkerError

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

_GH = "https://raw.githubusercontent.com"
_LCD = "https://raw.githubusercontent.com/newfacade/LeetCodeDataset/182cd19fd53161efd70a1ef074fe1056b659bfa3"
_CRUX = "https://raw.githubusercontent.com/facebookresearch/cruxeval/190faf16d175b5847b0af05d937872b1fb395942"
_REVAL = "https://raw.githubusercontent.com/r-eval/REval/2f148b913deb4ae0e0ce41f0245ef35054ede8d6"
LIVECODEBENCH_REPO = "livecodebench/execution-v2"


class SourceError(CodethinkerError, RuntimeError):
    """A source file is missing, unreachable or has the wrong checksum."""


@dataclass(frozen=True)
class SourceFile:
    key: str
    mirror_path: str  # relative to the mirror folder
    url: str
    sha256: str


_CRUXX = "https://raw.githubusercontent.com/CRUXEVAL-X/cruxeval-x/5c005eb77e88b593ffe8c81b89850dcb59249da4"
_CRUXEVAL_X = {  # language -> sha256 (the mirror's PROVENANCE.md)
    "cpp": "3c38b8d77e2f832d81bf696f441ada4f4b45edbbae9496934c317ef8d1d9c86c",
    "cs": "7cfeb71da970fe1ade909ba5552b8394d67f65d661f2a87d1c7b574fc9c63288",
    "d": "208350f679541b7acef078be0ca5ca69a70a0b392a75113a442e50781918bbde",
    "go": "fc143cdb9b8d6ec5420fc7af935106f2e62e95895ef0b9ab642785b931f49b86",
    "java": "5702d947aaac055885ff219e759a83b1459bf6494e6efa24e7841dc299a61420",
    "jl": "0ded17af0b8c3dd88171bfc167ef52bee3b198fdcd83113eb6293875e70ad843",
    "js": "5c4fa32ac9c639ff6d630e0dcb3aba899016428bcd660520c9913e21a5c20daa",
    "lua": "e3c5b81f244e9e9c66ba1a1980c9fe189f0122dadb38d1b0425441cbb707db29",
    "php": "6a9880b226f354778d4a6776d40a290e19e9e2803a48a482fcd8a3dfd1de7a2b",
    "pl": "429b063a83080a09f5caf848d0ac16e6391a2ff99d7dc610437a026aac67484b",
    "py": "7a0c363719dc5a5bbc4db3f008c92c3bedefc9a9bef34ec2754384719e36dcdd",
    "r": "252b9b1122fe785c32e868c88ecfc3434b19853f78b796e5d0399a7213fe9633",
    "rb": "71c2507145e762687a8d5e87004a2a5561efd98404b53e00460343b8a8b70094",
    "rkt": "c3d44984f2db70cfc2989f648f31a16f4e6ee36819a805522786cd4d1c525a30",
    "rs": "23a25d91609e93af19e626b69bb5fedf33a90432bef8e446f3ad753fd3a293b3",
    "scala": "2267ef78b69c6f037404bdcf61133b78bcfa97f26c5a08d5fe462abc3f985ec1",
    "sh": "8227a8a12d460656f0e4bf870d7980ad56ff806362a5e1142855b774c7308691",
    "swift": "b592f265ca818c371a38d1fa504eca39e7e1561c4d1e12566a40e88f3b8f2d57",
    "ts": "0f7d44ac2171257035897acd3797246c2fb8c46777cc10b0e6b74830c132c985",
}


def _cruxeval_x(lang: str, sha: str) -> SourceFile:
    name = f"cruxeval_preprocessed/{lang}.jsonl"
    return SourceFile(f"cruxeval-x/{lang}", f"cruxeval-x/{name}", f"{_CRUXX}/datasets/{name}", sha)


def _lcd(version: str, split: str, sha: str) -> SourceFile:
    name = f"LeetCodeDataset-{version}-{split}.jsonl.gz"
    return SourceFile(f"leetcode/{version}-{split}", f"leetcodedataset/{name}", f"{_LCD}/data/{name}", sha)


SOURCES: dict[str, SourceFile] = {
    s.key: s
    for s in [
        _lcd("v0.1.0", "train", "38fb21c4277c59937cfbe67ef42597a485f9428afa53695827d50fc8c3e58623"),
        _lcd("v0.2.0", "train", "7c3e4221572920a9e6c822083a327d2238ea70b5b3ba18459bee6855ef93e2c7"),
        # the test splits: the code-generation task's decontamination (codethinker.codegen.decontam)
        _lcd("v0.1.0", "test", "dcd4173103b5998bf1a498d4c80717af509daa84f73532c750b1b2a4f95bd092"),
        _lcd("v0.2.0", "test", "d3d5e553a787e2ba82b03a0ccade795b2d477c93ba3f2f75e98041a65322cf35"),
        _lcd("v0.3.0", "test", "c8e3cafb226f266fb49c854eb725c81f104a2165b1ec8cfd8b814999a7ae5a6f"),
        _lcd("v0.3.1", "test", "3ae536cb41342076691730b72424fdfb9264f233e05c81bf37b5f7e227ea1853"),
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
        # the generalization benchmarks (codethinker.evaluation.generalize)
        SourceFile(
            "humaneval",
            "humaneval/HumanEval.jsonl.gz",
            f"{_GH}/openai/human-eval/6d43fb980f9fee3c892a914eda09951f772ad10d/data/HumanEval.jsonl.gz",
            "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef",
        ),
        SourceFile(
            "humaneval+",
            "evalplus/HumanEvalPlus.jsonl.gz",
            f"{_GH}/evalplus/humanevalplus_release/200defce9e3429d28ca215b6dd061c0f7f31c18b/HumanEvalPlus.jsonl.gz",
            "272720b90ac375502c8ed23cd791c2a93dfb22a911641a494da74a426c09f101",
        ),
        SourceFile(
            "mbpp+",
            "evalplus/MbppPlus.jsonl.gz",
            f"{_GH}/evalplus/mbppplus_release/dadf43da556a00f7bacd71cb154f2932757d9144/MbppPlus.jsonl.gz",
            "af43697e8791c4c149bdfd6b489d8b5412507551ac20e28a439f650b8225db63",
        ),
        SourceFile(
            "mbpp",
            "mbpp/sanitized-mbpp.json",
            f"{_GH}/google-research/google-research/master/mbpp/sanitized-mbpp.json",
            "ca95deaa9a01ef0a6f439f88bcf0dd3db3563d22f22aad6cae04ebb9a8d8c8e9",
        ),
        SourceFile(
            "gsm8k",
            "gsm8k/test.jsonl",
            f"{_GH}/openai/grade-school-math/3101c7d5072418e28b9008a6636bde82a006892c/grade_school_math/data/test.jsonl",
            "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
        ),
        SourceFile(
            "gsm-hard",
            "gsm-hard/gsmhardv2.jsonl",
            f"{_GH}/reasoning-machines/pal/f81ca2a9777f002f98a6b4d0f10b61bd5c8feb02/datasets/gsmhardv2.jsonl",
            "2032b0188a49ac0ec38cbe1e695e7d62d6dddc44bbb64f920728aca710e9ddef",
        ),
        SourceFile(  # a Git LFS object upstream: the media URL serves its bytes
            "math500",
            "math500/test.jsonl",
            "https://media.githubusercontent.com/media/openai/prm800k/7ecc794703b2877f63226f2477a49b34f9b25163/"
            "prm800k/math_splits/test.jsonl",
            "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132",
        ),
        SourceFile(
            "reval-tasks",
            "reval/DREval_tasks.jsonl",
            f"{_REVAL}/data/DREval_tasks.jsonl",
            "a4fea071a4e3108ae00cc8a6a586505bff4237244b2dc8433b22303948fe7fa5",
        ),
        *(_cruxeval_x(lang, sha) for lang, sha in _CRUXEVAL_X.items()),
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


def load_leetcode(
    paths: Iterable[tuple[str, Path]], extra: Iterable[str] = ()
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Merge train splits ``(version, path)`` (later versions win on a shared task_id).

    Returns problem records and counts: ``rows`` read, ``duplicates`` (task_ids seen before),
    ``problems`` kept. ``extra`` names more string fields of the raw records to keep as they are
    (the code-generation task's ``test`` and ``query``).
    """
    merged: dict[str, dict[str, Any]] = {}
    rows = dups = 0
    extra = tuple(extra)
    fields = {**_LCD_FIELDS, **dict.fromkeys(extra, str)}
    for version, path in paths:
        for i, rec in enumerate(iter_jsonl(path, fields), start=1):
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
                **{k: rec[k] for k in extra},
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
