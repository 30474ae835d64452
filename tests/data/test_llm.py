"""The OpenAI-compatible chat client: bounded concurrency, the SDK's retries, disk cache.

Unit tests use a scripted HTTP server on 127.0.0.1 (its errors ask for a 10 ms ``Retry-After``, which
the SDK honours, unless ``retry_after_ms`` is None: then the SDK's own backoff applies);
``test_llm_backends_on_vllm`` runs both llm backends against a real vLLM server with the tiny random
Qwen2 model.
"""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from codethinker.config import from_mapping
from codethinker.data.llm import ChatClient, ChatConfig, LLMError

MSG = [{"role": "user", "content": "give me inputs"}]


class Script:
    """What the fake server answers: a list of (status, content) consumed in order, then 200."""

    def __init__(self, replies=(), content="f([1], 2)", delay=0.0):
        self.replies, self.content, self.delay = list(replies), content, delay
        self.requests, self.in_flight, self.max_in_flight = 0, 0, 0
        self.lock = threading.Lock()
        self.bodies: list[dict] = []
        self.retry_counts: list[str | None] = []  # the SDK's x-stainless-retry-count of each request
        self.retry_after_ms: int | None = 10


@pytest.fixture
def fake():
    script = Script()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(n))
            with script.lock:
                script.requests += 1
                script.in_flight += 1
                script.max_in_flight = max(script.max_in_flight, script.in_flight)
                script.bodies.append(body)
                script.retry_counts.append(self.headers.get("x-stainless-retry-count"))
                status, content = script.replies.pop(0) if script.replies else (200, script.content)
            time.sleep(script.delay)
            payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]})
            data = payload.encode() if status == 200 else b'{"error": "scripted"}'
            self.send_response(status)
            if status != 200 and script.retry_after_ms is not None:
                self.send_header("retry-after-ms", str(script.retry_after_ms))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            with script.lock:
                script.in_flight -= 1

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield script
    server.shutdown()
    server.server_close()


def client(fake, tmp_path, **kw):
    cfg = ChatConfig(base_url=fake.url, model="m", timeout_s=30, **kw)
    return ChatClient(cfg, tmp_path / "cache")


def test_cache_avoids_paying_twice(fake, tmp_path):
    c = client(fake, tmp_path)
    assert c.complete(MSG) == "f([1], 2)"
    assert c.complete(MSG) == "f([1], 2)"
    assert fake.requests == 1 and c.stats["cache_hits"] == 1
    c2 = client(fake, tmp_path)  # a new process reading the same cache
    assert c2.complete(MSG) == "f([1], 2)" and fake.requests == 1
    c3 = client(fake, tmp_path, temperature=0.1)  # other sampling parameters: another key
    c3.complete(MSG)
    assert fake.requests == 2
    assert fake.bodies[0]["model"] == "m" and fake.bodies[0]["messages"] == MSG


def test_retries_with_backoff_then_success(fake, tmp_path):
    fake.replies = [(503, ""), (429, ""), (500, "")]
    c = client(fake, tmp_path, max_retries=4)
    assert c.complete(MSG) == "f([1], 2)"
    assert c.stats["retries"] == 3 and fake.requests == 4


def test_gives_up_and_counts_failures(fake, tmp_path):
    fake.replies = [(503, "")] * 10
    c = client(fake, tmp_path, max_retries=2, max_concurrency=1)
    with pytest.raises(LLMError, match="failed after 3 attempts"):
        c.complete(MSG)
    fake.replies = [(400, "")]
    with pytest.raises(LLMError, match="HTTP 400"):  # a client error is not retried
        c.complete([{"role": "user", "content": "other"}])
    fake.replies = [(503, "")] * 3
    out = c.complete_many([MSG, [{"role": "user", "content": "x"}]])
    assert out == [None, "f([1], 2)"] and c.stats["failures"] == 1
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 1  # failures are not cached


def test_the_sdk_retries_with_its_own_backoff(fake, tmp_path):
    fake.replies, fake.retry_after_ms = [(503, ""), (503, "")], None
    c = client(fake, tmp_path, max_retries=4)
    t0 = time.monotonic()
    assert c.complete(MSG) == "f([1], 2)"
    assert fake.requests == 3 and c.stats["requests"] == 3 and c.stats["retries"] == 2
    assert fake.retry_counts == ["0", "1", "2"]  # the SDK's retry loop sent them, not ours
    assert time.monotonic() - t0 >= 0.75 * (0.5 + 1.0)  # its backoff: 0.5 s, then 1 s, less <= 25 % jitter


def test_a_client_error_is_not_retried(fake, tmp_path):
    fake.replies = [(400, "")] * 3
    c = client(fake, tmp_path, max_retries=4)
    with pytest.raises(LLMError) as err:
        c.complete(MSG)
    assert fake.requests == 1 and c.stats["requests"] == 1 and c.stats["retries"] == 0
    assert str(err.value) == f'{fake.url}/chat/completions: HTTP 400: {{"error": "scripted"}}'


def test_unreachable_endpoint(tmp_path):
    c = ChatClient(ChatConfig(base_url="http://127.0.0.1:9/v1", model="m", max_retries=1), None)
    with pytest.raises(LLMError, match="failed after 2 attempts"):
        c.complete(MSG)


def test_bounded_concurrency(fake, tmp_path):
    fake.delay = 0.05
    c = client(fake, tmp_path, max_concurrency=3)
    batch = [[{"role": "user", "content": str(i)}] for i in range(12)]
    assert c.complete_many(batch) == ["f([1], 2)"] * 12
    assert 1 <= fake.max_in_flight <= 3


def test_unknown_parameter_named():
    with pytest.raises(ValueError, match=r"gen_inputs\.llm\.modle: unknown key \(gen_inputs\.llm has: .*model"):
        from_mapping(ChatConfig, {"modle": "x"}, "gen_inputs.llm")


@pytest.mark.slow
@pytest.mark.vllm
def test_llm_backends_on_vllm(vllm_server, leetcode_problems, tmp_path):
    """Real vLLM (tiny random model: junk answers): calls, cache, retries, parse/reject."""
    from codethinker.contra.tracer import trace_many
    from codethinker.data.extract import filter_problems
    from codethinker.data.inputs import generate
    from codethinker.data.sft import extract_traces

    fns = filter_problems(leetcode_problems[:40])[0][:3]
    cfg = ChatConfig(
        base_url=vllm_server.base_url,
        model=vllm_server.model,
        max_tokens=64,
        max_concurrency=2,
        timeout_s=600,
    )
    c = ChatClient(cfg, tmp_path / "cache")
    records, counts = generate(fns, backend="llm", n=15, seed=0, client=c)
    assert c.stats["requests"] == 3 and c.stats["failures"] == 0
    # junk from a random model: every non-empty line is parsed or rejected with a reason
    assert counts["pairs"] + counts["short_of_n"] == 45
    assert counts["pairs"] == 0 or all(len(r["inputs"]) <= 15 for r in records)
    c2 = ChatClient(cfg, tmp_path / "cache")
    _, counts2 = generate(fns, backend="llm", n=15, seed=0, client=c2)
    assert c2.stats["cache_hits"] == 3 and c2.stats["requests"] == 0 and counts2 == counts

    # a flaky proxy in front of the server: 503 once, then forwards -> one retry, same answers
    import httpx

    state = {"n": 0}

    class Proxy(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state["n"] += 1
            if state["n"] == 1:
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            r = httpx.post(
                vllm_server.base_url + "/chat/completions",
                content=body,
                headers={"Content-Type": "application/json"},
                timeout=600,
            )
            self.send_response(r.status_code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(r.content)))
            self.end_headers()
            self.wfile.write(r.content)

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        flaky = ChatClient(
            ChatConfig(
                **{**cfg.__dict__, "base_url": f"http://127.0.0.1:{proxy.server_address[1]}/v1", "max_concurrency": 1}
            ),
            None,
        )
        flows = [o.flow for o in trace_many([(fns[0]["code"], fns[0]["examples"][0]["args"], "f")])]
        traces, rejected = extract_traces(flows, teacher="llm", clients=[flaky])
        assert flaky.stats["retries"] == 1 and flaky.stats["failures"] == 0
        assert traces == [None] and sum(rejected.values()) == 1  # junk is rejected, with its reason
    finally:
        proxy.shutdown()
        proxy.server_close()
