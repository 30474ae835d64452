"""Run inside .venv-verl (tests/training/test_verl.py starts them there; elsewhere they skip):
our configuration composes with verl's hydra config, verl's loader loads and runs our reward
function, and the DBS agent loop fills a GRPO group (4 regular + 4 DBS) over a scripted server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

verl = pytest.importorskip("verl", reason="verl lives in .venv-verl (scripts/make_verl_env.sh)")

from codethinker.contra.render import render_prompt, render_trace  # noqa: E402
from codethinker.contra.tracer import Flow  # noqa: E402
from codethinker.training.grpo import grpo_params  # noqa: E402
from codethinker.training.grpo_verl import AGENT_LOOP_NAME, agent_loop_yaml, verl_overrides  # noqa: E402

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


def _compose(tmp_path: Path):
    from hydra import compose, initialize_config_dir

    p = grpo_params(PARAMS)
    data = write_grpo_parquet(tmp_path / "grpo.parquet")
    loop = tmp_path / "agent_loop.yaml"
    loop.write_text(agent_loop_yaml(p))
    ov = verl_overrides("models/base", data, None, tmp_path, p, loop)
    cfg_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(cfg_dir), version_base=None):
        return compose(config_name="ppo_trainer", overrides=ov), loop


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
    entries = OmegaConf.load(loop)
    assert entries[0].name == AGENT_LOOP_NAME and entries[0].n_dbs == 4


def test_verls_loader_loads_and_runs_our_reward(tmp_path):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    cfg, _ = _compose(tmp_path)
    fn = get_custom_reward_fn(cfg)
    t = truths()[1]
    good = fn(data_source="tiny", solution_str=render_trace(Flow.from_json(t)), ground_truth=t, extra_info={})
    assert good["score"] == 4.0 and good["fmt"] == 1 and good["rcs"] == 1.0
    bad = fn(data_source="tiny", solution_str="[TRACE]\n[/TRACE]", ground_truth=t, extra_info=None)
    assert bad["score"] == 0.0 and bad["fmt"] == 0


class _Server:
    """Scripted rollout server: continues the response with the true trace up to the next stop string."""

    def __init__(self, tok, prompt_len: int, trace: str):
        self.tok, self.prompt_len, self.trace, self.calls = tok, prompt_len, trace, []

    async def generate(self, request_id, prompt_ids, sampling_params, **_):
        from verl.workers.rollout.replica import TokenOutput

        self.calls.append(dict(sampling_params))
        done = self.tok.decode(prompt_ids[self.prompt_len :], skip_special_tokens=True)
        rest = self.trace[len(done) :]
        cut = len(rest)
        for s in sampling_params.get("stop") or []:
            i = rest.find(s)
            if i >= 0:
                cut = min(cut, i + len(s))
        ids = self.tok.encode(rest[:cut], add_special_tokens=False)[: sampling_params.get("max_tokens", 10**6)]
        await asyncio.sleep(0)
        return TokenOutput(token_ids=ids)


def test_dbs_agent_loop_fills_a_group_of_regular_and_dbs_samples(tokenizer_dir):
    import types

    from transformers import AutoTokenizer

    from codethinker.rewards.crm import crm_score
    from codethinker.training.verl_dbs import _GROUPS, DBSAgentLoop

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    t = truths()[1]
    flow = Flow.from_json(t)
    messages = render_prompt(flow)
    prompt_ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(prompt_ids, dict) or hasattr(prompt_ids, "keys"):
        prompt_ids = prompt_ids["input_ids"]
    server = _Server(tok, len(prompt_ids), render_trace(flow))

    def make():
        loop = DBSAgentLoop.__new__(DBSAgentLoop)
        loop.tokenizer, loop.server_manager, loop.apply_chat_template_kwargs = tok, server, {}
        loop.n_regular, loop.n_dbs, loop.max_rounds = 4, 4, 64
        loop.block_stop, loop.final_stop, loop.response_length = ["[/LOCALS]"], ["[/TRACE]"], 2048
        loop._prompt_ids = types.MethodType(lambda self, m: _async(list(prompt_ids)), loop)
        return loop

    async def main():
        kw = {"raw_prompt": messages, "uid": "u1", "reward_model": {"ground_truth": t}}
        return await asyncio.gather(*(make().run({"temperature": 1.0}, **kw) for _ in range(8)))

    outs = asyncio.run(main())
    assert [o.extra_fields["dbs"] for o in outs] == [0] * 4 + [1] * 4
    for o in outs:
        text = tok.decode(o.response_ids, skip_special_tokens=True)
        assert crm_score(text, flow)["reward"] == 4.0
        assert o.response_mask == [1] * len(o.response_ids)
    assert sum(o.extra_fields.get("dbs_tokens_generated", 0) for o in outs) > 0
    assert any("[/LOCALS]" in (c.get("stop") or []) for c in server.calls)  # DBS stopped at block ends
    assert not _GROUPS  # the group's entry is released


async def _async(x):
    return x
