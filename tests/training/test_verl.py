"""verl backend: the configuration written from params.yaml, the checkpoint a run leaves, and the checks that
need verl itself (run in .venv-verl, which `scripts/make_verl_env.sh` makes: verl 0.9.1 caps
transformers < 5.11)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from codethinker.training.grpo import grpo_params
from codethinker.training.grpo_verl import (
    agent_loop_yaml,
    crm_reward_kwargs,
    model_ref,
    prompt_token_ids,
    reward_kwargs,
    run_grpo_verl,
    verl_overrides,
)
from codethinker.training.verl_merge import TRACKER, latest_actor_checkpoint, merger_command

ROOT = Path(__file__).resolve().parents[2]
VERL_PY = Path(os.environ.get("VERL_PYTHON", ROOT / ".venv-verl" / "bin" / "python"))


def verl_env_test_count() -> int:
    """The test functions under tests/training/verl_env, counted from their source, so that a test added
    there is expected to pass without a constant to keep in step (none of them is parametrized)."""
    n = 0
    for f in sorted((ROOT / "tests" / "training" / "verl_env").glob("test_*.py")):
        for node in ast.parse(f.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                assert "parametrize" not in ast.unparse(node), f"{f.name}::{node.name}: count its cases"
                n += 1
    return n


def test_the_verl_env_test_count_is_that_of_its_test_functions():
    assert verl_env_test_count() == len(
        re.findall(r"^def test_", (ROOT / "tests/training/verl_env/test_in_verl_env.py").read_text(), re.M)
    )


def test_overrides_follow_the_paper_settings(tmp_path):
    p = grpo_params(
        {
            "prompts_per_step": 32,
            "rollout": {"n_regular": 4, "n_dbs": 4},
            "lora": {"r": 64, "alpha": 128},
            "verl": {"nnodes": 4, "overrides": ["trainer.foo=1"]},
        }
    )
    ov = dict(o.split("=", 1) for o in verl_overrides("m", "train.parquet", None, tmp_path, p, tmp_path / "a.yaml"))
    assert ov["actor_rollout_ref.rollout.n"] == "8" and ov["algorithm.adv_estimator"] == "grpo"
    assert ov["actor_rollout_ref.actor.use_kl_loss"] == "false" and ov["algorithm.use_kl_in_reward"] == "false"
    assert ov["actor_rollout_ref.actor.entropy_coeff"] == "0.0"
    assert ov["actor_rollout_ref.model.lora_rank"] == "64" and ov["trainer.nnodes"] == "4"
    assert ov["reward.custom_reward_function.name"] == "compute_score"
    assert "mlflow" in ov["trainer.logger"] and ov["trainer.foo"] == "1"
    assert '"n_dbs": 4' in agent_loop_yaml(p)


def test_prompt_token_ids_are_token_ids_under_this_transformers(tokenizer_dir):
    from transformers import AutoTokenizer

    from codethinker.contra.render import render_prompt
    from codethinker.contra.tracer import Flow

    from .tinydata import truths

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    messages = render_prompt(Flow.from_json(truths()[0]))
    ids = prompt_token_ids(tok, messages)
    assert all(type(i) is int for i in ids)
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert ids == tok.encode(text, add_special_tokens=False)


class _Template:
    """A tokenizer whose ``apply_chat_template(tokenize=True)`` returns ``out`` whatever it is asked for."""

    def __init__(self, out):
        self.out = out

    def apply_chat_template(self, messages, **kwargs):
        assert kwargs["tokenize"] is True and kwargs["add_generation_prompt"] is True
        return self.out


def test_prompt_token_ids_accept_every_shape_apply_chat_template_returns():
    import numpy as np
    import torch
    from transformers import BatchEncoding

    ids = [151644, 872, 198, 151645]
    mask = [1] * len(ids)
    shapes = {
        "list": ids,
        "dict": {"input_ids": ids, "attention_mask": mask},
        "BatchEncoding": BatchEncoding({"input_ids": ids, "attention_mask": mask}),
        "BatchEncoding of tensors": BatchEncoding(
            {"input_ids": torch.tensor([ids]), "attention_mask": torch.tensor([mask])}
        ),
        "tensor": torch.tensor(ids),
        "batch of one tensor": torch.tensor([ids]),
        "numpy": np.array(ids),
        "numpy ints": [np.int64(i) for i in ids],
    }
    for name, out in shapes.items():
        got = prompt_token_ids(_Template(out), [{"role": "user", "content": "f(1)"}])
        assert got == ids and all(type(i) is int for i in got), name
    for junk in ({"input_ids": "text"}, ["input_ids", "attention_mask"], [ids, ids]):  # key names, 2 prompts
        with pytest.raises(TypeError, match="no token ids"):
            prompt_token_ids(_Template(junk), [{"role": "user", "content": "f(1)"}])


def test_dry_run_writes_the_command(tmp_path):
    p = grpo_params({"backend": "verl", "verl": {"dry_run": True}})
    m = run_grpo_verl("models/base", "train.parquet", tmp_path, p)
    assert m["launched"] is False
    cmd = (tmp_path / "verl" / "command.sh").read_text()
    assert "verl.trainer.main_ppo" in cmd and "actor_rollout_ref.rollout.n=8" in cmd


def test_dynamic_sampling_is_refused_and_warmup_passed_on(tmp_path):
    p = grpo_params({"backend": "verl", "rollout": {"filter_groups": True}, "verl": {"dry_run": True}})
    with pytest.raises(ValueError, match="filter_groups"):
        run_grpo_verl("models/base", "train.parquet", tmp_path, p)
    assert not (tmp_path / "verl").exists()  # refused before anything is written
    p = grpo_params({"backend": "verl", "rollout": {"n_greedy": 1}, "verl": {"dry_run": True}})
    with pytest.raises(ValueError, match="n_greedy"):
        run_grpo_verl("models/base", "train.parquet", tmp_path, p)
    assert not (tmp_path / "verl").exists()
    p = grpo_params({"backend": "verl", "warmup_steps": 5, "verl": {"dry_run": True}})
    run_grpo_verl("models/base", "train.parquet", tmp_path, p)
    assert "actor_rollout_ref.actor.optim.lr_warmup_steps=5" in (tmp_path / "verl" / "command.sh").read_text()


_FAKE_VERL_PYTHON = """#!{python}
import json, os, sys
from pathlib import Path

with open(os.environ["FAKE_VERL_LOG"], "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "pythonpath": os.environ.get("PYTHONPATH", "")}}) + "\\n")
if sys.argv[1:3] == ["-m", "verl.trainer.main_ppo"]:  # training: leaves verl's checkpoint tracker
    ckpt = Path(dict(a.split("=", 1) for a in sys.argv[3:])["trainer.default_local_dir"])
    ckpt.mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("3")
elif sys.argv[1:3] == ["-m", "codethinker.training.verl_merge"]:  # the export, as verl_merge reports it
    args = dict(zip(sys.argv[3::2], sys.argv[4::2]))
    for d in ("adapter", "merged"):
        (Path(args["--out"]) / d).mkdir()
    print(json.dumps({{"step": 3, "checkpoint": "c", "adapter": "a", "merged": "m"}}))
else:
    sys.exit("unexpected call")
"""


def test_a_launched_verl_run_ends_by_exporting_adapter_and_merged(tmp_path, monkeypatch):
    fake = tmp_path / "verl-python"
    fake.write_text(_FAKE_VERL_PYTHON.format(python=sys.executable))
    fake.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("VERL_PYTHON", str(fake))
    monkeypatch.setenv("FAKE_VERL_LOG", str(log))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "sft" / "merged").mkdir(parents=True)
    p = grpo_params({"backend": "verl", "rollout": {"max_completion_tokens": 64}})
    m = run_grpo_verl("models/sft/merged", "data/grpo.parquet", Path("models/grpo"), p, root=ROOT)
    train, export = [json.loads(line) for line in log.read_text().splitlines()]
    assert train["argv"][:2] == ["-m", "verl.trainer.main_ppo"]
    assert export["argv"] == [
        "-m",
        "codethinker.training.verl_merge",
        "--checkpoints",
        str(tmp_path / "models" / "grpo" / "checkpoints"),
        "--out",
        str(tmp_path / "models" / "grpo"),
        "--base",
        str(tmp_path / "models" / "sft" / "merged"),
    ]
    assert export["pythonpath"].split(os.pathsep)[0] == str(ROOT)  # the project is importable in verl's env
    assert m["launched"] is True and m["exported_step"] == 3
    assert (tmp_path / "models" / "grpo" / "adapter").is_dir() and (tmp_path / "models" / "grpo" / "merged").is_dir()


def _looks_like_a_path(value: str) -> bool:
    return "/" in value and not value.startswith("[") and "{" not in value


def test_the_command_carries_the_crm_switches_and_only_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "sft" / "merged").mkdir(parents=True)  # a relative local model, as stages.grpo passes
    p = grpo_params({"backend": "verl", "crm": {"orm": False, "alpha": 0.5}, "verl": {"dry_run": True}})
    run_grpo_verl("models/sft/merged", "data/grpo.parquet", Path("models/grpo"), p)
    cfg_dir = tmp_path / "models" / "grpo" / "verl"
    overrides = (cfg_dir / "overrides.txt").read_text().splitlines()
    kwargs = "{task:'output_prediction',reward:crm,crm:{alpha:0.5,ccw:true,gate:true,orm:false,prefix:true,prm:true}}"
    assert "++reward.custom_reward_function.reward_kwargs=" + kwargs in overrides
    values = dict(o.lstrip("+").split("=", 1) for o in overrides)
    assert values["actor_rollout_ref.model.path"] == str(tmp_path / "models" / "sft" / "merged")
    paths = [v for v in values.values() if _looks_like_a_path(v)]
    assert len(paths) >= 6 and all(Path(v).is_absolute() for v in paths), paths
    cmd = shlex.split((cfg_dir / "command.sh").read_text())
    assert Path(cmd[0]).is_absolute() and cmd[3:] == overrides
    assert "CODETHINKER_CRM" not in (cfg_dir / "command.sh").read_text()


def test_a_hub_id_stays_a_hub_id_and_a_misspelled_switch_stops_the_launch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert model_ref("Qwen/Qwen2.5-Coder-7B-Instruct") == "Qwen/Qwen2.5-Coder-7B-Instruct"
    assert model_ref("./base") == str(tmp_path / "base")
    with pytest.raises(ValueError, match=r"grpo\.crm\.gates: unknown key"):
        crm_reward_kwargs({"gates": False})
    assert crm_reward_kwargs({}) == "++reward.custom_reward_function.reward_kwargs={crm:{}}"


def test_the_command_carries_the_reward_kind_and_a_baseline_gets_its_prompts(tmp_path, monkeypatch, grpo_parquet):
    import pandas as pd

    from codethinker.contra.render import vanilla_prompt
    from codethinker.contra.tracer import Flow

    monkeypatch.chdir(tmp_path)
    p = grpo_params({"backend": "verl", "reward": "orm", "crm": {"gate": False}, "verl": {"dry_run": True}})
    m = run_grpo_verl("models/sft/merged", grpo_parquet, Path("models/grpo"), p)
    cfg_dir = tmp_path / "models" / "grpo" / "verl"
    values = dict(o.lstrip("+").split("=", 1) for o in (cfg_dir / "overrides.txt").read_text().splitlines())
    assert values["reward.custom_reward_function.reward_kwargs"] == "{task:'output_prediction',reward:orm}"
    assert values["trainer.experiment_name"] == "grpo-orm"  # not the default "grpo-dbs-crm"
    data = cfg_dir / "grpo_train.orm.parquet"
    assert values["data.train_files"] == values["data.val_files"] == str(data)
    assert (m["reward"], m["prompt_format"], m["n_regular"], m["n_dbs"]) == ("orm", "vanilla", 8, 0)
    original, rows = pd.read_parquet(grpo_parquet), pd.read_parquet(data)
    assert list(rows.columns) == list(original.columns) and len(rows) == len(original)  # verl's schema
    for prompt, rm, info in zip(rows["prompt"], rows["reward_model"], rows["extra_info"], strict=True):
        flow = Flow.from_json(rm["ground_truth"])
        assert [dict(x) for x in prompt] == vanilla_prompt("\n".join(flow.lines), flow.entry, flow.input)
        assert info["reward"] == "orm" and info["prompt_format"] == "vanilla" and info["id"]
    loop = json.loads(agent_loop_yaml(p)[2:])
    assert (loop["n_regular"], loop["n_dbs"], loop["final_stop"]) == (8, 0, ["[/ANSWER]"])  # no DBS, vanilla stop
    assert json.loads((cfg_dir / "agent_loop.yaml").read_text()[2:]) == loop
    assert reward_kwargs(grpo_params({"reward": "whitebox", "whitebox": {"a": 0.25, "k": 3}})) == (
        "++reward.custom_reward_function.reward_kwargs={task:'output_prediction',reward:whitebox,whitebox:{a:0.25,k:3}}"
    )
    # crm: the parquet as contra_sft wrote it; crm {}: every switch its default
    crm = grpo_params({"backend": "verl", "crm": {}, "verl": {"dry_run": True}})
    run_grpo_verl("models/sft/merged", grpo_parquet, Path("models/crm"), crm)
    crm_lines = (tmp_path / "models" / "crm" / "verl" / "overrides.txt").read_text().splitlines()
    crm_values = dict(o.lstrip("+").split("=", 1) for o in crm_lines)
    assert crm_values["data.train_files"] == str(grpo_parquet.resolve())
    every = "alpha:1.0,ccw:true,gate:true,orm:true,prefix:true,prm:true"  # crm {}: every switch its default
    assert (
        crm_values["reward.custom_reward_function.reward_kwargs"]
        == f"{{task:'output_prediction',reward:crm,crm:{{{every}}}}}"
    )
    assert crm_values["trainer.experiment_name"] == "grpo-dbs-crm"


def _actor(root: Path, step: int, world: int = 1, ranks: int | None = None) -> Path:
    """A checkpoint directory laid out as verl's FSDPCheckpointManager writes it."""
    actor = root / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world}))
    for r in range(world if ranks is None else ranks):
        (actor / f"model_world_size_{world}_rank_{r}.pt").write_bytes(b"shard")
    return actor


def test_the_latest_complete_checkpoint_is_the_one_exported(tmp_path):
    root = tmp_path / "checkpoints"
    with pytest.raises(FileNotFoundError):
        latest_actor_checkpoint(root)
    _actor(root, 2, world=2)
    assert latest_actor_checkpoint(root) == (2, root / "global_step_2" / "actor")
    _actor(root, 10, world=2)  # numeric order, not "10" < "2"
    _actor(root, 11, world=2, ranks=1)  # a rank's shard is missing: incomplete
    (root / "global_step_12").mkdir()  # killed before the actor was saved
    assert latest_actor_checkpoint(root) == (10, root / "global_step_10" / "actor")
    (root / TRACKER).write_text("2\n")  # verl's tracker decides when its checkpoint is complete
    assert latest_actor_checkpoint(root) == (2, root / "global_step_2" / "actor")
    (root / TRACKER).write_text("11")
    assert latest_actor_checkpoint(root)[0] == 10
    actor = root / "global_step_10" / "actor"
    assert merger_command(actor, tmp_path / "hf", "py") == [
        "py",
        "-m",
        "verl.model_merger",
        "merge",
        "--backend",
        "fsdp",
        "--local_dir",
        str(actor),
        "--target_dir",
        str(tmp_path / "hf"),
    ]


@pytest.mark.verl
@pytest.mark.slow
def test_checks_inside_the_verl_environment(tmp_path, shared_dir):  # shared_dir: the inner tests read ../shared
    if not VERL_PY.exists():
        pytest.skip(f"{VERL_PY} is absent: run scripts/make_verl_env.sh (make verl-env)")
    export = tmp_path / "grpo"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CODETHINKER_VERL_EXPORT_DIR": str(export)}
    r = subprocess.run(
        [str(VERL_PY), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/training/verl_env"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-3000:]
    summary = r.stdout.strip().splitlines()[-1]
    assert re.fullmatch(rf"{verl_env_test_count()} passed(, \d+ warnings?)? in .*", summary), summary
    _loads_under_this_transformers(export / "merged")


def _loads_under_this_transformers(merged: Path) -> None:
    """The model exported in the verl environment (transformers < 5.11) loads and generates here (transformers
    5.16+, and vLLM where it is installed)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(merged)
    model = AutoModelForCausalLM.from_pretrained(merged)
    ids = torch.tensor([tok.encode("[TRACE]\n", add_special_tokens=False)])
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=4, do_sample=False)
    assert out.shape[1] == ids.shape[1] + 4 or out[0, -1].item() == tok.eos_token_id
    if importlib.util.find_spec("vllm") is None:
        return
    from codethinker.engines.vllm import VLLMEngine

    engine = VLLMEngine(merged, max_model_len=512, max_num_seqs=1, dtype="float32")
    try:
        prompt = engine.apply_chat_template([{"role": "user", "content": "f(1)"}])
        [[completion]] = engine.continue_prefixes([prompt], 1, stop=["[/TRACE]"], max_tokens=4, temperature=0.0)
    finally:
        engine.close()
    assert completion.n_tokens > 0
