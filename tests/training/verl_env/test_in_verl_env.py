"""Run inside .venv-verl (tests/training/test_verl.py starts them there; elsewhere they skip), with the real
Qwen2 tokenizer and verl's own entry points; only the vLLM server is scripted:

- our overrides compose with verl's hydra config (the reward kind, CRM switches and absolute paths included);
- verl's reward loader and its reward-loop worker load our reward file and score with the run's switches and
  with the run's reward kind (``grpo.reward``: a baseline's reward on its own answer format);
- a baseline reward (``orm``): verl's ``RLHFDataset`` reads its vanilla prompts from the parquet the launcher
  writes, and the agent loop samples all 8 of a group regularly, stopped at ``[/ANSWER]``;
- verl's ``AgentLoopWorker.generate_sequences`` runs the DBS agent loop on a batch that verl's
  ``RLHFDataset`` made from our GRPO parquet: a group of 4 regular + 4 DBS samples per prompt, trained ids
  equal to the sampled ids, both kinds ended alike, one seed per DBS request;
- a checkpoint written by verl's ``FSDPCheckpointManager`` (FSDP2, LoRA, on CPU) becomes
  ``adapter/`` and ``merged/`` through verl's own merger."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

verl = pytest.importorskip("verl", reason="verl lives in .venv-verl (scripts/make_verl_env.sh)")

from codethinker.contra.render import render_prompt, render_trace, vanilla_prompt  # noqa: E402
from codethinker.contra.tracer import Flow  # noqa: E402
from codethinker.training.grpo import grpo_params  # noqa: E402
from codethinker.training.grpo_verl import (  # noqa: E402
    AGENT_LOOP_NAME,
    agent_loop_yaml,
    prompt_token_ids,
    verl_overrides,
    write_reward_data,
)

from ..tinydata import truths, write_grpo_parquet  # noqa: E402

PARAMS = {
    "max_steps": 3,
    "prompts_per_step": 2,
    "learning_rate": 1e-6,
    "crm": {"gate": False},
    "lora": {"r": 8, "alpha": 16},
    "rollout": {"n_regular": 4, "n_dbs": 4, "max_completion_tokens": 256},
    "verl": {"nnodes": 2, "gpus_per_node": 8, "loggers": ["console", "mlflow"]},
}
IM_END = "<|im_end|>"


def _compose(tmp_path: Path, model: str | Path = "models/base", **changes):
    from hydra import compose, initialize_config_dir

    params = {**PARAMS, **changes}
    p = grpo_params(params)
    data = write_grpo_parquet(tmp_path / "grpo.parquet")
    loop = tmp_path / "agent_loop.yaml"
    loop.write_text(agent_loop_yaml(p))
    ov = verl_overrides(model, data, None, tmp_path, p, loop)
    cfg_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(cfg_dir), version_base=None):
        return compose(config_name="ppo_trainer", overrides=ov), loop


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory, tokenizer_dir) -> Path:
    from codethinker.training.bootstrap import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("verl-tiny"), tokenizer_dir, seed=0)


def test_prompt_token_ids_are_token_ids_under_verls_transformers(tokenizer_dir):
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from codethinker.training.verl_dbs import DBSAgentLoop

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    messages = render_prompt(Flow.from_json(truths()[0]))
    raw = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    assert list(raw) == ["input_ids", "attention_mask"]  # the trap: list() of verl's transformers' answer
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    expected = tok.encode(text, add_special_tokens=False)
    assert prompt_token_ids(tok, messages) == expected
    loop = SimpleNamespace(tokenizer=tok, apply_chat_template_kwargs={})  # what AgentLoopBase sets
    ids = asyncio.run(DBSAgentLoop._prompt_ids(loop, messages))  # the agent loop's own method
    assert ids == expected and all(type(i) is int for i in ids)


def test_overrides_compose_with_verls_config(tmp_path):
    from omegaconf import OmegaConf

    cfg, loop = _compose(tmp_path)
    a, r = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert cfg.algorithm.adv_estimator == "grpo" and cfg.algorithm.use_kl_in_reward is False
    assert a.use_kl_loss is False and a.entropy_coeff == 0 and a.loss_agg_mode == "token-mean"
    assert r.n == 8 and r.agent.default_agent_loop == AGENT_LOOP_NAME
    assert cfg.actor_rollout_ref.model.lora_rank == 8 and cfg.actor_rollout_ref.model.lora_alpha == 16
    assert list(cfg.trainer.logger) == ["console", "mlflow"] and cfg.trainer.nnodes == 2
    assert cfg.trainer.total_training_steps == 3 and cfg.trainer.resume_mode == "auto"
    assert cfg.reward.custom_reward_function.path.endswith("codethinker/rewards/verl_reward.py")
    assert OmegaConf.to_container(cfg.reward.custom_reward_function.reward_kwargs) == {
        "task": "output_prediction",
        "reward": "crm",
        "crm": {"prm": True, "prefix": True, "gate": False, "orm": True, "ccw": True, "alpha": 1.0},
    }
    for path in (
        cfg.actor_rollout_ref.model.path,
        cfg.reward.custom_reward_function.path,
        r.agent.agent_loop_config_path,
        cfg.trainer.default_local_dir,
        cfg.data.train_files,
    ):
        assert Path(path).is_absolute(), path
    entries = OmegaConf.load(loop)
    assert entries[0].name == AGENT_LOOP_NAME and entries[0].n_dbs == 4 and entries[0].seed == 0


def test_verls_loader_loads_and_runs_our_reward(tmp_path):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    t = truths()[1]
    trace = render_trace(Flow.from_json(t))
    full = get_custom_reward_fn(_compose(tmp_path, crm={})[0])
    good = full(data_source="tiny", solution_str=trace, ground_truth=t, extra_info={})
    assert good["score"] == 4.0 and good["fmt"] == 1 and good["rcs"] == 1.0
    bad = full(data_source="tiny", solution_str="[TRACE]\n[/TRACE]", ground_truth=t, extra_info=None)
    assert bad["score"] == 0.0 and bad["fmt"] == 0
    no_orm = get_custom_reward_fn(_compose(tmp_path, crm={"orm": False})[0])
    assert no_orm(data_source="tiny", solution_str=trace, ground_truth=t, extra_info={})["score"] == 2.0


def _reward_loop_scores(cfg, tok, responses: list[str], truth: str) -> list[float]:
    """verl's reward-loop worker (what its RewardLoopManager runs as a Ray actor) on a batch of responses."""
    import torch
    from verl import DataProto
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    ids = [[*tok.encode(r, add_special_tokens=False), tok.convert_tokens_to_ids(IM_END)] for r in responses]
    width = max(map(len, ids))
    resp = torch.tensor([i + [tok.pad_token_id] * (width - len(i)) for i in ids])
    mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i in ids])
    n = len(ids)
    data = DataProto.from_dict(
        tensors={"responses": resp, "attention_mask": mask},
        non_tensors={
            "data_source": np.array(["tiny"] * n, dtype=object),
            "reward_model": np.array([{"ground_truth": truth}] * n, dtype=object),
            "extra_info": np.array([{"index": k} for k in range(n)], dtype=object),
        },
    )
    worker = RewardLoopWorker(cfg)
    out = worker.loop.run_until_complete(worker.compute_score_batch(data))
    return [o["reward_score"] for o in out]


def test_verls_reward_loop_scores_with_the_runs_switches(tmp_path, tokenizer_dir, monkeypatch):
    from transformers import AutoTokenizer

    monkeypatch.delenv("CODETHINKER_CRM", raising=False)  # a Ray worker started by `ray start` has no such variable

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    t = truths()[1]
    trace = render_trace(Flow.from_json(t))
    full, _ = _compose(tmp_path, model=tokenizer_dir, crm={})
    ablated, _ = _compose(tmp_path, model=tokenizer_dir, crm={"orm": False})
    assert _reward_loop_scores(full, tok, [trace], t) == [4.0]
    assert _reward_loop_scores(ablated, tok, [trace], t) == [2.0]  # w/o ORM: R = alpha * R_proc


def _vanilla_answer(truth: str, right: bool = True) -> str:
    flow = Flow.from_json(truth)
    value = flow.output_text if right else "None"
    return f"[THOUGHT]\ntracing\n[/THOUGHT]\n[ANSWER]\nassert f({flow.input}) == {value}\n[/ANSWER]"


def test_verls_reward_loop_scores_with_the_runs_reward_kind(tmp_path, tokenizer_dir):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    t = truths()[1]
    orm, _ = _compose(tmp_path, model=tokenizer_dir, reward="orm")
    assert OmegaConf.to_container(orm.reward.custom_reward_function.reward_kwargs) == {
        "task": "output_prediction",
        "reward": "orm",
    }
    answers = [_vanilla_answer(t), _vanilla_answer(t, right=False), "junk"]
    assert _reward_loop_scores(orm, tok, answers, t) == [2.0, 0.0, 0.0]  # CodeReasoner: 2 iff valid and right
    crm, _ = _compose(tmp_path, model=tokenizer_dir, crm={})
    assert _reward_loop_scores(crm, tok, answers[:1], t) == [0.0]  # the same answer is no ConTra trace
    wb, _ = _compose(tmp_path, model=tokenizer_dir, reward="whitebox", whitebox={"a": 0.5, "k": 2})
    assert _reward_loop_scores(wb, tok, answers[:1], t) == [1.0]  # io without white-box answers: 2 * 0.5


class _Server:
    """Scripted stand-in for verl's vLLM servers: continues each prompt's true trace up to the first stop string
    (kept), at most ``max_tokens`` tokens, encoded piece by piece as a sampler would emit them."""

    def __init__(self, tok, prompts: list[tuple[list[int], str]]):
        self.tok, self.prompts, self.calls = tok, prompts, []

    async def generate(self, request_id, prompt_ids, sampling_params, **_):
        from verl.workers.rollout.replica import TokenOutput

        found = [(p, t) for p, t in self.prompts if list(prompt_ids[: len(p)]) == p]
        assert found, f"the request does not start with a prompt's chat-template token ids: {list(prompt_ids[:4])}"
        [(prompt, trace)] = found
        done = self.tok.decode(prompt_ids[len(prompt) :], skip_special_tokens=True)
        assert trace.startswith(done), "the server was handed ids that are not the sampled ones"
        rest = trace[len(done) :]
        cut = len(rest)
        for s in sampling_params.get("stop") or []:
            i = rest.find(s)
            if i >= 0:
                cut = min(cut, i + len(s))
        ids = self.tok.encode(rest[:cut], add_special_tokens=False)[: sampling_params.get("max_tokens", 10**6)]
        self.calls.append({"prompt_ids": list(prompt_ids), "params": dict(sampling_params), "out": ids})
        await asyncio.sleep(0)
        return TokenOutput(token_ids=ids)


def _rollout(tmp_path: Path, policy: Path, max_completion_tokens: int):
    """verl's RLHFDataset -> a batch of 2 prompts x 8 (uid, interleaved, as its trainer does) -> verl's
    AgentLoopWorker with our agent loop; returns (tokenizer, server, [(prompt ids, trace, truth)] per prompt,
    [(prompt ids, response ids, dbs flag)] per sample)."""
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.utils import hf_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    rollout = {**PARAMS["rollout"], "max_completion_tokens": max_completion_tokens}
    cfg, _ = _compose(tmp_path, model=policy, rollout=rollout)
    tok = hf_tokenizer(str(policy))
    ds = RLHFDataset(data_files=[str(tmp_path / "grpo.parquet")], tokenizer=tok, config=cfg.data, processor=None)
    rows = [ds[0], ds[1]]
    prompts = []
    for r in rows:
        truth = r["reward_model"]["ground_truth"]
        prompts.append((prompt_token_ids(tok, list(r["raw_prompt"])), render_trace(Flow.from_json(truth)), truth))
    server = _Server(tok, [(ids, trace) for ids, trace, _ in prompts])
    batch = DataProto.from_single_dict(collate_fn(rows))
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in rows], dtype=object)
    batch = batch.repeat(repeat_times=8, interleave=True)
    worker = AgentLoopWorker(cfg, llm_client=server)
    out = asyncio.run(worker.generate_sequences(batch))
    width = out.batch["prompts"].shape[1]
    samples = []
    for i in range(len(out)):
        mask = out.batch["attention_mask"][i]
        prompt = out.batch["prompts"][i][mask[:width].bool()].tolist()
        response = out.batch["responses"][i][: int(mask[width:].sum())].tolist()
        samples.append((prompt, response, int(out.non_tensor_batch["dbs"][i])))
    return tok, server, prompts, samples


def _sampled_path(response: list[int], prompt: list[int], calls: list[dict]) -> bool:
    """``response`` is a concatenation of engine outputs, each requested with the prompt + the ids before it."""
    k = 0
    while k < len(response):
        step = next(
            (
                len(c["out"])
                for c in calls
                if c["out"] and c["prompt_ids"] == prompt + response[:k] and response[k : k + len(c["out"])] == c["out"]
            ),
            0,
        )
        if not step:
            return False
        k += step
    return True


@pytest.fixture(scope="module")
def rollout(tmp_path_factory, tiny_policy):
    """One GRPO step's rollout of 2 prompts x (4 regular + 4 DBS) through verl's agent-loop worker."""
    return _rollout(tmp_path_factory.mktemp("rollout"), tiny_policy, max_completion_tokens=512)


@pytest.mark.slow
def test_verls_agent_loop_worker_fills_groups_of_regular_and_dbs_samples(rollout):
    from codethinker.rewards.crm import crm_score
    from codethinker.training.verl_dbs import _GROUPS

    tok, _, prompts, samples = rollout
    assert [s[2] for s in samples] == ([0] * 4 + [1] * 4) * 2  # verl's interleaved copies: 4 regular, 4 DBS
    for g, (prompt, _, truth) in enumerate(prompts):
        for got_prompt, response, _ in samples[8 * g : 8 * g + 8]:
            assert got_prompt == prompt  # the project's prompt ids are what verl trains on
            text = tok.decode(response, skip_special_tokens=True)
            assert crm_score(text, Flow.from_json(truth))["reward"] == pytest.approx(4.0)
    assert not _GROUPS  # every group's entry is released


@pytest.mark.slow
def test_trained_ids_are_the_sampled_ids(rollout):
    tok, server, prompts, samples = rollout
    im_end = tok.convert_tokens_to_ids(IM_END)
    dbs_calls = [c for c in server.calls if "[/LOCALS]" in c["params"]["stop"]]
    assert dbs_calls  # DBS stopped at block ends
    for g, (prompt, trace, _) in enumerate(prompts):
        for _, response, dbs in samples[8 * g : 8 * g + 8]:
            body = response[:-1] if response[-1:] == [im_end] else response
            if not dbs:
                assert body == tok.encode(trace, add_special_tokens=False)  # the engine's ids, untouched
            else:
                assert _sampled_path(body, prompt, dbs_calls)  # the ids DBS sampled, block by block ...
                assert tok.encode(tok.decode(body), add_special_tokens=False) != body  # re-encoding merges "]\n"


@pytest.mark.slow
def test_regular_and_dbs_samples_end_alike_with_the_end_of_turn_token(rollout):
    tok, _, _, samples = rollout
    im_end = tok.convert_tokens_to_ids(IM_END)
    for _, response, dbs in samples:
        assert response[-1] == im_end and response.count(im_end) == 1, f"dbs={dbs}"


@pytest.mark.slow
def test_each_dbs_request_samples_with_its_own_seed(rollout):
    _, server, _, _ = rollout
    seeded = [c for c in server.calls if "seed" in c["params"]]
    assert len(server.calls) - len(seeded) == 8  # only the 2 x 4 regular samples are left to verl's seeding
    assert all("seed" in c["params"] for c in server.calls if "[/LOCALS]" in c["params"]["stop"])  # DBS blocks
    assert len({c["params"]["seed"] for c in seeded}) == len(seeded)  # sibling prefixes and samples differ


@pytest.mark.slow
def test_responses_cut_at_the_length_limit_get_no_end_token(tmp_path, tiny_policy):
    tok, _, _, samples = _rollout(tmp_path, tiny_policy, max_completion_tokens=24)
    im_end = tok.convert_tokens_to_ids(IM_END)
    for _, response, _ in samples:
        assert 0 < len(response) <= 24 and im_end not in response


@pytest.mark.slow
def test_a_baseline_reward_rolls_out_its_own_prompts_all_regular(tmp_path, tiny_policy):
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.utils import hf_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    cfg, _ = _compose(tmp_path, model=tiny_policy, reward="orm")
    data = write_reward_data(tmp_path / "grpo.parquet", tmp_path / "verl", grpo_params({**PARAMS, "reward": "orm"}))
    tok = hf_tokenizer(str(tiny_policy))
    ds = RLHFDataset(data_files=[str(data)], tokenizer=tok, config=cfg.data, processor=None)
    rows = [ds[0], ds[1]]
    prompts = []
    for r in rows:
        truth = r["reward_model"]["ground_truth"]
        flow = Flow.from_json(truth)
        assert list(r["raw_prompt"]) == vanilla_prompt("\n".join(flow.lines), flow.entry, flow.input)
        prompts.append((prompt_token_ids(tok, list(r["raw_prompt"])), _vanilla_answer(truth) + "\nmore", truth))
    server = _Server(tok, [(ids, answer) for ids, answer, _ in prompts])
    batch = DataProto.from_single_dict(collate_fn(rows))
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in rows], dtype=object)
    batch = batch.repeat(repeat_times=8, interleave=True)
    out = asyncio.run(AgentLoopWorker(cfg, llm_client=server).generate_sequences(batch))
    assert list(out.non_tensor_batch["dbs"]) == [0] * 16  # 8 regular samples per prompt, no DBS tree
    assert len(server.calls) == 16 and all(c["params"]["stop"] == ["[/ANSWER]"] for c in server.calls)
    width = out.batch["prompts"].shape[1]
    for i in range(len(out)):
        response = out.batch["responses"][i][: int(out.batch["attention_mask"][i][width:].sum())].tolist()
        text = tok.decode(response, skip_special_tokens=True)
        assert text == _vanilla_answer(prompts[i // 8][2])  # cut at the stop string, kept


def _fsdp_checkpoints(tmp_path: Path, model: Any, tok: Any, steps: int, train: Callable[[Any], None]) -> Path:
    """verl's ``FSDPCheckpointManager`` on ``model`` sharded over one CPU rank: for each step 1..``steps``,
    ``train(model)`` (under ``no_grad``), then ``global_step_<step>/actor`` and the tracker, as verl's trainer
    writes them. Returns the checkpoints' folder."""
    import torch
    import torch.distributed as dist
    from omegaconf import OmegaConf
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

    root = tmp_path / "checkpoints"
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        fully_shard(model, mesh=init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",)))
        optim = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        contents = OmegaConf.create({"save_contents": ["model", "optimizer", "extra"], "load_contents": ["model"]})
        manager = FSDPCheckpointManager(model, optim, None, processing_class=tok, checkpoint_config=contents)
        torch.manual_seed(0)
        for step in range(1, steps + 1):
            with torch.no_grad():
                train(model)
            manager.save_checkpoint(str(root / f"global_step_{step}" / "actor"), global_step=step)
            (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    finally:
        dist.destroy_process_group()
    return root


@pytest.mark.slow
def test_a_verl_fsdp_checkpoint_becomes_adapter_and_merged_model(tmp_path, tiny_policy):
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codethinker.training.grpo_verl import export_verl_model

    lora_b: dict[str, torch.Tensor] = {}

    def train(model) -> None:  # an "optimizer step": different LoRA B at each checkpoint
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
                lora_b[name] = param.full_tensor().clone()

    model = AutoModelForCausalLM.from_pretrained(str(tiny_policy), dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    tok = AutoTokenizer.from_pretrained(str(tiny_policy))
    root = _fsdp_checkpoints(tmp_path, model, tok, steps=2, train=train)

    out = tmp_path / "grpo"
    res = export_verl_model(root, out, tiny_policy, python=sys.executable)  # what run_grpo_verl runs after training
    assert res["step"] == 2 and res["checkpoint"] == str(root / "global_step_2" / "actor")

    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert config["r"] == 8 and config["lora_alpha"] == 16 and config["base_model_name_or_path"] == str(tiny_policy)
    saved = load_file(out / "adapter" / "adapter_model.safetensors")
    for name, value in lora_b.items():  # the last checkpoint's weights (bf16, as verl's merger writes them)
        got = saved[name.replace(".default.weight", ".weight")]
        torch.testing.assert_close(got.float(), value.bfloat16().float())

    ids = torch.tensor([tok.encode("[TRACE]\n[CODE]\n", add_special_tokens=False)])
    base = AutoModelForCausalLM.from_pretrained(str(tiny_policy), dtype=torch.float32)
    with torch.no_grad():
        base_logits = base(ids).logits
        adapted = PeftModel.from_pretrained(base, str(out / "adapter"))(ids).logits
        merged_model = AutoModelForCausalLM.from_pretrained(str(out / "merged"), dtype=torch.float32)
        merged = merged_model(ids).logits
    assert not any("lora" in k for k in merged_model.state_dict())  # a plain transformers model
    torch.testing.assert_close(merged, adapted, atol=1e-4, rtol=1e-4)
    assert (merged - base_logits).abs().max() > 1e-3  # the trained adapter is in it
    merged_tok = AutoTokenizer.from_pretrained(str(out / "merged"))
    assert merged_tok.eos_token == IM_END and merged_tok.chat_template
    assert AutoTokenizer.from_pretrained(str(out / "adapter")).chat_template == merged_tok.chat_template
    assert not list(out.glob(".verl-export-*"))  # the staging directory is gone
    keep = os.environ.get("CODETHINKER_VERL_EXPORT_DIR")  # test_verl.py loads it again under the main environment
    if keep:
        shutil.copytree(out, keep, dirs_exist_ok=True)


@pytest.mark.slow
def test_a_full_fine_tuning_checkpoint_exports_the_tokenizer_as_it_is(tmp_path, tiny_policy):
    """Full fine-tuning: the merged model is verl's merger's, its tokenizer saved without how it was loaded
    (``local_files_only`` follows HF_HUB_OFFLINE), so an offline and an online export are the same bytes."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codethinker.training.grpo_verl import export_verl_model

    def train(model) -> None:  # a trained weight the export must carry
        weight = next(p for n, p in model.named_parameters() if n.endswith("lm_head.weight") or "embed" in n)
        weight.add_(torch.randn_like(weight) * 0.5)

    model = AutoModelForCausalLM.from_pretrained(str(tiny_policy), dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(tiny_policy), local_files_only=True)  # as verl loads it offline
    root = _fsdp_checkpoints(tmp_path, model, tok, steps=1, train=train)

    out = tmp_path / "grpo"
    res = export_verl_model(root, out, tiny_policy, python=sys.executable)
    assert res["adapter"] is None and not (out / "adapter").exists()
    config = json.loads((out / "merged" / "tokenizer_config.json").read_text())
    assert "local_files_only" not in config
    merged_tok = AutoTokenizer.from_pretrained(str(out / "merged"))
    assert merged_tok.eos_token == IM_END and merged_tok.chat_template == tok.chat_template
    base = AutoModelForCausalLM.from_pretrained(str(tiny_policy), dtype=torch.float32)
    merged = AutoModelForCausalLM.from_pretrained(str(out / "merged"), dtype=torch.float32)
    moved = [n for n, p in merged.state_dict().items() if not torch.equal(p, base.state_dict()[n])]
    assert moved  # the checkpoint's weights, not the base's
