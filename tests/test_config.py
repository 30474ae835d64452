"""codethinker.config: every stage's typed section from the real params.yaml (the values that ran
before the loader, for each profile), and the loader's errors on hostile files."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from codethinker.config import ConfigError, from_mapping, load_config, policy_model
from codethinker.config.bootstrap import BootstrapConfig
from codethinker.config.codegen import CodegenConfig
from codethinker.config.codegen_eval import CodegenEvalConfig
from codethinker.config.data import (
    AstFilterConfig,
    ContraSFTConfig,
    DedupConfig,
    EvalTruthConfig,
    ExecFilterConfig,
    FetchConfig,
    GenInputsConfig,
    SynthConfig,
)
from codethinker.config.evaluate import EvaluateConfig
from codethinker.config.generalize import GeneralizeConfig
from codethinker.config.grpo import GRPOCodegenConfig, GRPOConfig, TrainEvalConfig
from codethinker.config.recode import RecodeConfig
from codethinker.config.sft import SFTConfig
from codethinker.data.llm import ChatConfig
from codethinker.evaluation.generalize import GenConfig
from codethinker.evaluation.harness import EvalConfig
from codethinker.params import PROFILES, ParamsError, flatten, load_params, resolve_params
from codethinker.training.bootstrap import TinyShape
from codethinker.training.common import LoRAParams
from codethinker.training.grpo import GRPOParams, VerlParams
from codethinker.training.rollout import RolloutParams
from codethinker.training.sft import SFTParams
from codethinker.training.train_eval import EvalParams

ROOT = Path(__file__).resolve().parents[1]
PARAMS = ROOT / "params.yaml"
STAGES = {
    "fetch": FetchConfig,
    "ast_filter": AstFilterConfig,
    "gen_inputs": GenInputsConfig,
    "synth": SynthConfig,
    "exec_filter": ExecFilterConfig,
    "dedup": DedupConfig,
    "contra_sft": ContraSFTConfig,
    "codegen_data": CodegenConfig,
    "codegen_truth": CodegenConfig,
    "crpl_data": RecodeConfig,
    "reward_model": RecodeConfig,
    "eval_truth": EvalTruthConfig,
    "bootstrap": BootstrapConfig,
    "sft": SFTConfig,
    "grpo": GRPOConfig,
    "grpo_codegen": GRPOCodegenConfig,
    "train_eval": TrainEvalConfig,
    "codegen_eval": CodegenEvalConfig,
    "evaluate": EvaluateConfig,
    "generalize": GeneralizeConfig,
    "generalize_truth": GeneralizeConfig,
}


def test_every_stage_is_listed() -> None:
    assert set(STAGES) == {p.stem for p in (ROOT / "stages").glob("*.py") if p.stem != "__init__"}


@pytest.mark.parametrize("stage", sorted(STAGES))
@pytest.mark.parametrize("profile", PROFILES)
def test_each_stage_imports_and_its_config_loads_from_params_yaml(stage: str, profile: str) -> None:
    module = importlib.import_module(f"stages.{stage}")
    cls = STAGES[stage]
    assert getattr(module, cls.__name__) is cls  # the stage reads its section through this class
    cfg = load_config(cls, PARAMS, profile=profile)
    assert cfg.base.profile == profile and dataclasses.is_dataclass(cfg)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.base = cfg.base  # type: ignore[misc]


def test_every_section_field_has_help() -> None:
    for path in (ROOT / "codethinker" / "config").glob("*.py"):
        module = importlib.import_module(f"codethinker.config.{path.stem}")
        for obj in vars(module).values():
            if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)) or obj.__module__ != module.__name__:
                continue
            if obj.__name__ != "ParamsFile":
                missing = [f.name for f in dataclasses.fields(obj) if not f.metadata.get("help")]
                assert not missing, f"{obj.__name__}: no help for {missing}"


# --------------------------------------------------------------------------- the values that ran before


# keys whose null in params.yaml means "take it from another section"
DERIVED = {
    "sft": {"model", "seed"},
    "grpo": {"init", "seed"},
    "grpo_codegen": {"seed", "max_steps", "prompts_per_step", "rollout.filter_groups"},  # null: grpo's
    "train_eval": {"models.before_sft", "sampled_temperature"},
    "codegen": {"model", "threshold", "batch_size", "embed_cache"},
    "recode": {"model"},
}


def _old(resolved: dict[str, Any], name: str) -> dict[str, Any]:
    """What the stages built from ``load_section(name)`` before the loader (their own code, kept here)."""
    section = dict(resolved[name])
    base = resolved["base"]
    seed = int(base.get("seed", 0))
    policy = str((resolved.get("model") or {}).get("base") or "models/base")
    teacher = resolved.get("contra_sft", {}).get("teacher", "template")
    if name == "sft":
        section.setdefault("seed", seed)
        model = str(section.pop("model", None) or policy)
        lora = LoRAParams(**section.pop("lora"))
        return {"model": model, "params": SFTParams(**section, lora=lora)}
    if name == "grpo":
        model = str(section.pop("init", None) or policy)
        if section.get("seed") is None:
            section["seed"] = seed
        judge = ("test_timeout_s", "setup_timeout_s", "memory_mb", "workers")  # the codegen judge's limits
        section.setdefault("judge", {k: resolved["codegen"][k] for k in judge})
        section.setdefault("trace_thoughts", teacher != "none")
        nested = {"rollout": RolloutParams, "lora": LoRAParams, "verl": VerlParams}
        section.update({k: cls(**section[k]) for k, cls in nested.items() if k in section})
        return {"init": model, "params": GRPOParams(**section)}
    if name == "train_eval":
        models = dict(section.pop("models"))
        models["before_sft"] = models.get("before_sft") or policy
        section.setdefault("seed", seed)
        section.setdefault("trace_thoughts", teacher != "none")
        section.setdefault("reward", resolved["grpo"].get("reward") or "crm")
        section.setdefault("whitebox", resolved["grpo"].get("whitebox") or {})
        if section.get("sampled_temperature") is None:  # the sampled pass: GRPO's rollout temperature
            section["sampled_temperature"] = resolved["grpo"]["rollout"]["temperature"]
        return {"models": models, "params": EvalParams(**section)}
    if name == "evaluate":
        values = {k: v for k, v in section.items() if k in EvalConfig.__dataclass_fields__}
        return {"sampling": EvalConfig(**{"seed": seed, **values})}
    if name == "generalize":
        values = {k: v for k, v in section.items() if k in GenConfig.__dataclass_fields__}
        return {"sampling": GenConfig(**{"seed": seed, **values})}
    if name in ("gen_inputs", "contra_sft"):
        return {"llm": ChatConfig(**section.get("llm", {}))}
    if name == "bootstrap":
        return {"shape": TinyShape(**(section.get("shape") or {}))}
    if name == "codegen":  # the similarity rule is dedup's
        d = resolved["dedup"]
        return {
            "model": d["model"],
            "threshold": d["threshold"],
            "batch_size": d["batch_size"],
            "embed_cache": d["cache_dir"],
        }
    return {}


@pytest.mark.parametrize("profile", PROFILES)
def test_the_loaded_values_are_the_ones_that_ran_before(profile: str) -> None:
    resolved = resolve_params(load_params(PARAMS), profile)
    for name, cls in STAGES.items():
        cfg = load_config(cls, PARAMS, profile=profile)
        got = flatten(cfg.as_dict())
        # every value params.yaml sets for this profile reaches the config as written (same type too)
        for key, value in flatten({**resolved[cls.SECTION], "base": resolved["base"]}).items():
            if value is None and key in DERIVED.get(cls.SECTION, ()):
                continue  # null: the value another section gives (below)
            if key.split(".")[0] in cfg.inactive():  # a mode not in use (lora.* of a full fine-tune): not logged
                assert key not in got, (profile, name, key)
                continue
            assert key in got and got[key] == value and type(got[key]) is type(value), (profile, name, key)
        # what the stage derived (seed, policy, trace_thoughts, the reward) and the objects it built
        for attr, value in _old(resolved, cls.SECTION).items():
            assert getattr(cfg, attr) == value, (profile, name, attr)
    assert policy_model(PARAMS) == resolve_params(load_params(PARAMS))["model"]["base"]


def test_what_the_stages_log_keeps_every_key_they_logged() -> None:
    """MLflow params: the old dicts' keys and values are all still there (the loader adds defaults)."""
    resolved = resolve_params(load_params(PARAMS), "default")
    for name in ("fetch", "ast_filter", "gen_inputs", "synth", "exec_filter", "dedup", "contra_sft", "bootstrap"):
        new = flatten(load_config(STAGES[name], PARAMS).as_dict())
        old = flatten({**resolved[name], "base": resolved["base"]})
        assert old.items() <= new.items(), name
    for name, path in (("sft", "model"), ("grpo", "init")):
        old = _old(resolved, name)
        logged = {k: v for k, v in resolved[name].items() if k != path}
        logged.update({path: old[path], "seed": old["params"].seed})
        if name == "grpo":
            logged["trace_thoughts"] = old["params"].trace_thoughts
        cfg = load_config(STAGES[name], PARAMS)
        new = flatten(cfg.as_dict())
        kept = {k: v for k, v in flatten(logged).items() if k.split(".")[0] not in cfg.inactive()}
        assert all(k in new and new[k] == v for k, v in kept.items()), name


# --------------------------------------------------------------------------- hostile params files


def _write(tmp_path: Path, **sections: Any) -> Path:
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump({"base": {"profile": "default", "seed": 0}, **sections}))
    return p


@pytest.mark.parametrize(
    ("cls", "sections", "message"),
    [
        (SFTConfig, {"sft": {"epoch": 3}}, r"params\.yaml: sft\.epoch: unknown key \(sft has: .*epochs"),
        (SFTConfig, {"sft": {"lora": {"rank": 8}}}, r"params\.yaml: sft\.lora\.rank: unknown key"),
        (GRPOConfig, {"grpo": {"rollout": {"n": 8}}}, r"params\.yaml: grpo\.rollout\.n: unknown key"),
        (SFTConfig, {"sft": {"out": "models/sft"}}, r"params\.yaml: sft\.out: unknown key"),  # a path: the cmd's
        (GRPOConfig, {"grpo": {"reward_model": "m"}}, r"params\.yaml: grpo\.reward_model: a path, not a parameter"),
        (
            EvaluateConfig,
            {"evaluate": {"models": {"base": {"model": "m", "path": "x"}}}},
            r"params\.yaml: evaluate\.models\.base\.path: unknown key",
        ),
        (EvaluateConfig, {"evaluate": {"engine": {"dtyp": "auto"}}}, r"params\.yaml: evaluate\.engine\.dtyp"),
        (EvaluateConfig, {"evaluate": {"models": {"x": {"dep": "d"}}}}, r"evaluate\.models\.x\.model: missing key"),
        (SFTConfig, {"sft": {"epochs": "three"}}, r"params\.yaml: sft\.epochs: expected float, got str 'three'"),
        (ExecFilterConfig, {"exec_filter": {"keep_none": 1}}, r"exec_filter\.keep_none: expected bool, got int 1"),
        (FetchConfig, {"fetch": {"leetcode": ["a", 1]}}, r"params\.yaml: fetch\.leetcode\[1\]: expected str"),
        (GenInputsConfig, {"gen_inputs": {"llm": {"modle": "x"}}}, r"params\.yaml: gen_inputs\.llm\.modle"),
        (ContraSFTConfig, {"contra_sft": {"synth_split": {"eval": "5"}}}, r"contra_sft\.synth_split\.eval: expected"),
        (BootstrapConfig, {"bootstrap": {"shape": {"layers": 2}}}, r"params\.yaml: bootstrap\.shape\.layers"),
        (SFTConfig, {"sft": {"finetune": "qlora"}}, r"params\.yaml: sft: sft\.finetune must be one of lora, full"),
        (SFTConfig, {"sft": [1, 2]}, r"params\.yaml: sft: expected a mapping, got list"),
        (SFTConfig, {"model": {"base": "m"}}, r"params\.yaml: no section 'sft'"),
        (SFTConfig, {"sft": {}, "base": {"profile": "huge"}}, r"params\.yaml: base\.profile: must be one of"),
        (SFTConfig, {"sft": {}, "base": {"sed": 1}}, r"params\.yaml: base\.sed: unknown key"),
        (SFTConfig, {"sft": {"max_steps": {"full": 1}}}, r"params\.yaml: sft\.max_steps: .*no value for profile"),
        (TrainEvalConfig, {"train_eval": {}, "grpo": {"reward": "prm"}}, r"params\.yaml: grpo: grpo\.reward must be"),
    ],
)
def test_a_bad_params_file_names_the_file_and_the_key(tmp_path, cls, sections, message) -> None:
    path = _write(tmp_path, **sections)
    with pytest.raises(ConfigError, match=message.replace("params\\.yaml", str(path).replace(".", "\\."))):
        load_config(cls, path)


def test_a_missing_file_and_missing_sections(tmp_path) -> None:
    with pytest.raises(ParamsError, match="params file not found"):
        load_config(SFTConfig, tmp_path / "nope.yaml")
    path = _write(tmp_path)  # only base: a section read by another stage may be left out
    assert load_config(ContraSFTConfig, path, missing_ok=True).teacher == "template"
    assert policy_model(path) == "models/base"
    with pytest.raises(ConfigError, match="no section 'contra_sft'"):
        load_config(ContraSFTConfig, path)


def test_derived_values_and_explicit_ones(tmp_path) -> None:
    path = _write(
        tmp_path,
        base={"profile": "full", "seed": 7},
        model={"base": {"default": "tiny", "full": "hub/model"}},
        contra_sft={"teacher": "none"},
        sft={"model": None},
        grpo={"seed": None, "reward": "whitebox", "whitebox": {"k": 2}},
        train_eval={"models": {"after_sft": "s"}, "reward": "orm"},
    )
    sft, grpo, te = (load_config(c, path) for c in (SFTConfig, GRPOConfig, TrainEvalConfig))
    assert (sft.model, sft.params.seed, grpo.init, grpo.params.seed) == ("hub/model", 7, "hub/model", 7)
    assert not grpo.params.trace_thoughts and not te.params.trace_thoughts
    assert te.models == {"after_sft": "s", "before_sft": "hub/model"}  # order kept: before_sft added last
    assert (te.params.reward, te.params.whitebox) == ("orm", {"k": 2})  # set here: kept; left out: grpo's
    assert load_config(SFTConfig, path, profile="default").model == "tiny"


def test_evaluate_config_by_profile(tmp_path) -> None:
    """(was tests/evaluation/test_harness.py::test_eval_config_by_profile: harness.eval_config)"""
    section = {"runs": 3, "max_tokens": {"default": 32, "full": 4096}, "models": {}, "engine": {}}
    path = _write(tmp_path, base={"profile": "default", "seed": 4}, evaluate=section)
    assert load_config(EvaluateConfig, path).sampling == EvalConfig(runs=3, max_tokens=32, seed=4)
    assert load_config(EvaluateConfig, path, profile="full").sampling.max_tokens == 4096


def test_from_mapping_is_as_strict() -> None:
    assert from_mapping(LoRAParams, None) == LoRAParams()
    assert from_mapping(GenConfig, {"n": 2}).n == 2
    with pytest.raises(ConfigError, match=r"^lora\.rank: unknown key"):
        from_mapping(LoRAParams, {"rank": 1}, "lora")
    with pytest.raises(ConfigError, match=r"^r: expected int, got str"):
        from_mapping(LoRAParams, {"r": "8"})
    with pytest.raises(ConfigError, match=r"^gen: need n >= 1"):
        from_mapping(GenConfig, {"n": 0}, "gen")


# --- YAML 1.2 floats: how `dvc exp run -S` writes small numbers back into params.yaml ------------------


def test_a_float_dvc_writes_with_an_exponent_loads_as_a_float(tmp_path):
    """``dvc exp run -S grpo.learning_rate=0.00005`` writes ``learning_rate: 5e-05``, which YAML 1.1
    (PyYAML's default) reads as a string, and the stage stopped with "expected float, got str '5e-05'"."""
    p = tmp_path / "params.yaml"
    text = PARAMS.read_text()
    grpo_lr = text[text.index("\ngrpo:") :].index("learning_rate: {default: ") + text.index("\ngrpo:")
    p.write_text(
        text[:grpo_lr] + re.sub(r"^learning_rate: \{default: [^,]+", "learning_rate: {default: 5e-05", text[grpo_lr:])
    )
    assert "learning_rate: {default: 5e-05" in p.read_text()
    assert load_config(GRPOConfig, p).params.learning_rate == 5e-05


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_finite_float_written_by_repr_reads_back(x):
    from codethinker.params import load_yaml

    assert load_yaml(f"x: {x!r}") == {"x": x}


@pytest.mark.parametrize("text", ["5e", "1e3x", "e5", "1.2.3e4", "0x1p3", "5e-05abc", "--5e3"])
def test_what_is_no_float_stays_a_string(text):
    from codethinker.params import load_yaml

    assert load_yaml(f"x: {text}") == {"x": text}
