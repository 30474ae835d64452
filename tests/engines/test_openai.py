"""OpenAIEngine against a scripted local HTTP server: the SDK's retries, bounded concurrency, stop strings.

The server's errors ask for a 10 ms ``Retry-After`` (the SDK honours it) unless ``retry_after_ms=None``:
then the SDK's own backoff applies.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from codethinker.engines.openai import OpenAIEngine, ServerError


class FakeServer:
    def __init__(
        self, fail_first: int = 0, delay_s: float = 0.0, status: int = 503, strip_stop=False, retry_after_ms=10
    ):
        self.fail_first, self.delay_s, self.status, self.strip_stop = fail_first, delay_s, status, strip_stop
        self.retry_after_ms = retry_after_ms
        self.bodies: list[dict] = []
        self.retry_counts: list[str | None] = []  # the SDK's x-stainless-retry-count of each request
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        srv = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with srv.lock:
                    srv.bodies.append(body)
                    srv.retry_counts.append(self.headers.get("x-stainless-retry-count"))
                    k = len(srv.bodies)
                    srv.in_flight += 1
                    srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
                time.sleep(srv.delay_s)
                with srv.lock:
                    srv.in_flight -= 1
                if k <= srv.fail_first:
                    self.send_response(srv.status)
                    if srv.retry_after_ms is not None:
                        self.send_header("retry-after-ms", str(srv.retry_after_ms))
                    self.end_headers()
                    self.wfile.write(b"busy")
                    return
                stop = (body.get("stop") or [""])[0]
                choices = []
                for i in range(body["n"]):
                    text = f"{body['prompt'][-3:]}#{i}"
                    if stop and not srv.strip_stop:
                        text += stop
                    choices.append(
                        {"index": i, "text": text, "finish_reason": "stop", "logprobs": {"tokens": ["t"] * (i + 2)}}
                    )
                payload = json.dumps({"choices": choices}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def server():
    servers = []

    def make(**kw):
        s = FakeServer(**kw)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def test_answers_in_order_with_token_counts(server):
    s = server()
    eng = OpenAIEngine(s.url, "m", max_concurrency=4)
    out = eng.continue_prefixes(["aaa", "bbb", "ccc"], 2, stop=["[/LOCALS]"], max_tokens=8)
    assert [[c.text for c in r] for r in out] == [[f"{p}#0[/LOCALS]", f"{p}#1[/LOCALS]"] for p in ("aaa", "bbb", "ccc")]
    assert [c.n_tokens for c in out[0]] == [2, 3]
    assert all(b["include_stop_str_in_output"] for b in s.bodies)


def test_retries_with_backoff_then_succeeds(server):
    s = server(fail_first=2)
    eng = OpenAIEngine(s.url, "m", max_retries=3)
    [[c]] = eng.continue_prefixes(["xyz"], 1, stop=[], max_tokens=4)
    assert c.text == "xyz#0" and eng.requests_sent == 3


def test_gives_up_after_the_retries_and_on_client_errors(server):
    eng = OpenAIEngine(server(fail_first=99).url, "m", max_retries=1)
    with pytest.raises(ServerError, match="failed after 2 attempts"):
        eng.continue_prefixes(["x"], 1, stop=[], max_tokens=4)
    eng = OpenAIEngine(server(fail_first=99, status=400).url, "m", max_retries=3)
    with pytest.raises(ServerError, match="HTTP 400"):
        eng.continue_prefixes(["x"], 1, stop=[], max_tokens=4)
    assert eng.requests_sent == 1


def test_the_sdk_retries_with_its_own_backoff(server):
    s = server(fail_first=2, retry_after_ms=None)
    eng = OpenAIEngine(s.url, "m", max_retries=4)
    t0 = time.monotonic()
    [[c]] = eng.continue_prefixes(["xyz"], 1, stop=[], max_tokens=4)
    assert c.text == "xyz#0" and len(s.bodies) == 3 and eng.requests_sent == 3
    assert s.retry_counts == ["0", "1", "2"]  # the SDK's retry loop sent them, not ours
    assert time.monotonic() - t0 >= 0.75 * (0.5 + 1.0)  # its backoff: 0.5 s, then 1 s, less <= 25 % jitter


def test_a_client_error_is_not_retried(server):
    s = server(fail_first=99, status=400)
    eng = OpenAIEngine(s.url, "m", max_retries=4)
    with pytest.raises(ServerError) as err:
        eng.continue_prefixes(["x"], 1, stop=[], max_tokens=4)
    assert len(s.bodies) == 1 and eng.requests_sent == 1
    assert str(err.value) == f"{s.url}/completions: HTTP 400: busy"


def test_unreachable_server_fails_after_retries():
    from codethinker.engines.vllm_server import free_port

    eng = OpenAIEngine(f"http://127.0.0.1:{free_port()}/v1", "m", max_retries=1)
    with pytest.raises(ServerError):
        eng.continue_prefixes(["x"], 1, stop=[], max_tokens=4)


def test_concurrency_is_bounded(server):
    s = server(delay_s=0.05)
    eng = OpenAIEngine(s.url, "m", max_concurrency=3)
    eng.continue_prefixes([f"p{i:02d}" for i in range(12)], 1, stop=[], max_tokens=4)
    assert 1 <= s.max_in_flight <= 3 and len(s.bodies) == 12


def test_stop_string_restored_when_the_server_strips_it(server):
    s = server(strip_stop=True)
    eng = OpenAIEngine(s.url, "m", vllm_extras=False)
    [[c]] = eng.continue_prefixes(["abc"], 1, stop=["[/TRACE]"], max_tokens=4)
    assert c.text == "abc#0[/TRACE]"
    assert "include_stop_str_in_output" not in s.bodies[0]


def test_greedy_sends_n1_and_repeats(server):
    s = server()
    eng = OpenAIEngine(s.url, "m")
    [row] = eng.continue_prefixes(["abc"], 3, stop=[], max_tokens=4, temperature=0)
    assert len(row) == 3 and len({c.text for c in row}) == 1 and s.bodies[0]["n"] == 1
