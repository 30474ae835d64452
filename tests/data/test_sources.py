"""fetch: mirror or pinned download, sha256 checks, merging the LeetCodeDataset train splits."""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import json
import threading
from pathlib import Path

import pytest

from codethinker.data.io import RecordError
from codethinker.data.sources import (
    SOURCES,
    SourceError,
    SourceFile,
    load_benchmarks,
    load_leetcode,
    load_livecodebench,
    resolve,
)

GENERAL = {"humaneval", "humaneval+", "mbpp", "mbpp+", "gsm8k", "gsm-hard", "math500", "reval-tasks"}


def test_pinned_urls_and_checksums():
    crux_x = {k for k in SOURCES if k.startswith("cruxeval-x/")}
    lcd_tests = {f"leetcode/{v}-test" for v in ("v0.1.0", "v0.2.0", "v0.3.0", "v0.3.1")}  # codegen's decontamination
    assert set(SOURCES) - crux_x == {
        "leetcode/v0.1.0-train",
        "leetcode/v0.2.0-train",
        "cruxeval",
        "reval",
        *GENERAL,
        *lcd_tests,
    }
    assert len(crux_x) == 19
    for s in SOURCES.values():
        assert s.url.startswith(("https://raw.githubusercontent.com/", "https://media.githubusercontent.com/"))
        assert len(s.sha256) == 64 and s.mirror_path.split("/")[-1] in s.url
    assert "newfacade/LeetCodeDataset/182cd19fd53161efd70a1ef074fe1056b659bfa3" in SOURCES["leetcode/v0.2.0-train"].url


def test_mirror_files_verify(data_mirror, tmp_path):
    """Every pinned file is in the mirror with the recorded sha256 (the PROVENANCE.md figures)."""
    for key in SOURCES:
        path, origin = resolve(SOURCES[key], data_mirror, tmp_path, download=False)
        assert origin == "mirror" and path.is_relative_to(data_mirror)
    assert not any(tmp_path.iterdir())  # read in place, nothing copied


def _source(tmp_path: Path, content: bytes, url: str = "http://127.0.0.1:9/x.jsonl") -> SourceFile:
    return SourceFile("test", "sub/x.jsonl", url, hashlib.sha256(content).hexdigest())


def test_wrong_checksum_is_an_error(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "sub").mkdir(parents=True)
    (mirror / "sub" / "x.jsonl").write_bytes(b"tampered\n")
    with pytest.raises(SourceError, match="sha256"):
        resolve(_source(tmp_path, b"original\n"), mirror, tmp_path / "cache", download=False)


def test_missing_source_names_what_to_set(tmp_path):
    with pytest.raises(SourceError, match=r"set base\.mirror \(or \$CODETHINKER_MIRROR\)"):
        resolve(_source(tmp_path, b"x"), None, tmp_path / "cache", download=False)
    # download on, but nothing listens there: the error names the URL and the mirror setting
    with pytest.raises(SourceError, match=r"http://127\.0\.0\.1:9/x\.jsonl.*base\.mirror"):
        resolve(_source(tmp_path, b"x"), tmp_path, tmp_path / "cache", download=True, timeout_s=5)


@pytest.fixture
def http_dir(tmp_path):
    """A static file server on 127.0.0.1 serving tmp_path/www."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None  # quiet
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_download_verify_and_cache(http_dir, tmp_path):
    root, base = http_dir
    content = b'{"id": "sample_0", "code": "def f(x):\\n    return x"}\n'
    (root / "x.jsonl").write_bytes(content)
    src = _source(tmp_path, content, f"{base}/x.jsonl")
    path, origin = resolve(src, None, tmp_path / "cache", timeout_s=10)
    assert origin == "download" and path.read_bytes() == content
    (root / "x.jsonl").unlink()  # second time: from the cache, no request
    assert resolve(src, None, tmp_path / "cache")[1] == "cache"
    bad = SourceFile("bad", "sub/y.jsonl", f"{base}/y.jsonl", "0" * 64)
    (root / "y.jsonl").write_bytes(b"other bytes")
    with pytest.raises(SourceError, match="sha256"):
        resolve(bad, None, tmp_path / "cache2", timeout_s=10)


def test_merge_real_splits(data_mirror, tmp_path):
    paths = [(v, resolve(SOURCES[f"leetcode/{v}-train"], data_mirror, tmp_path)[0]) for v in ("v0.1.0", "v0.2.0")]
    problems, counts = load_leetcode(paths)
    assert counts == {"rows": 3460, "duplicates": 1570, "problems": 1890}
    ids = [p["task_id"] for p in problems]
    assert len(set(ids)) == len(ids)
    two_sum = next(p for p in problems if p["task_id"] == "two-sum")
    assert two_sum["version"] == "v0.2.0" and two_sum["entry_point"] == "Solution().twoSum"
    assert two_sum["input_output"][0]["input"] == "nums = [2,7,11,15], target = 9"


def test_malformed_leetcode_record_names_row_and_field(tmp_path):
    good = {"task_id": "a", "prompt": "", "completion": "", "entry_point": "", "input_output": [], "meta": {}}
    bad = dict(good, task_id="b", input_output=[{"output": "1"}])
    p = tmp_path / "x.jsonl.gz"
    with gzip.open(p, "wt") as fh:
        fh.write(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(RecordError, match=r"row 2, field 'input_output\[0\]'"):
        load_leetcode([("v0", p)])
    del bad["input_output"]
    with gzip.open(p, "wt") as fh:
        fh.write(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(RecordError, match=r"row 2, field 'input_output': missing field"):
        load_leetcode([("v0", p)])


def test_benchmarks(data_mirror, tmp_path):
    crux = resolve(SOURCES["cruxeval"], data_mirror, tmp_path)[0]
    reval = resolve(SOURCES["reval"], data_mirror, tmp_path)[0]
    progs = load_benchmarks(crux, reval)
    assert sum(p["benchmark"] == "cruxeval" for p in progs) == 800
    assert sum(p["benchmark"] == "reval" for p in progs) == 154


def test_livecodebench_offline_is_skipped(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    progs, why = load_livecodebench()
    assert progs == [] and "skipped livecodebench/execution-v2" in why
