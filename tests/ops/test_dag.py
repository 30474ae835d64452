"""The flow's view of dvc.yaml: order, upstream, classes, overrides (real DVC, no Prefect run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.dag import apply_overrides, classify, normalize_overrides, read_dag, select
from tests.ops.toy import ROOT, make_toy

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # DVC 3.67 internals


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_toy(
        tmp_path_factory.mktemp("dag"),
        {
            # listed first: order must come from the DAG
            "report": {"deps": ["train", "side"], "meta": {"llm": "report.engine_backend"}},
            "prep": {"meta": {"llm": "prep.backend"}},
            "train": {"deps": ["prep"]},
            "side": {"meta": {"llm": ["side.gen.teacher"]}},
        },
    )


def test_read_dag_orders_stages_by_dependency(toy: Path) -> None:
    specs = read_dag(toy)
    names = [s.name for s in specs]
    assert sorted(names) == ["prep", "report", "side", "train"]
    assert names.index("prep") < names.index("train") < names.index("report")
    assert names.index("side") < names.index("report")
    by = {s.name: s for s in specs}
    assert by["report"].upstream == ("side", "train")
    assert by["prep"].upstream == ()
    assert by["train"].metrics == ("metrics/train.json",)
    assert "out/train.json" in by["train"].outs


def test_stage_added_to_dvc_yaml_appears(tmp_path: Path) -> None:
    root = make_toy(tmp_path, {"a": {}})
    data = yaml.safe_load((root / "dvc.yaml").read_text())
    data["stages"]["b"] = {"cmd": "echo b", "deps": ["out/a.json"], "outs": ["out/b.json"]}
    (root / "dvc.yaml").write_text(yaml.safe_dump(data))
    assert [s.name for s in read_dag(root)] == ["a", "b"]


def test_select_keeps_targets_and_upstream(toy: Path) -> None:
    specs = read_dag(toy)
    assert [s.name for s in select(specs, ["train"])] == ["prep", "train"]
    assert len(select(specs, None)) == 4
    with pytest.raises(ValueError, match="unknown stage"):
        select(specs, ["nope"])


def test_classify_reads_gpu_and_llm_from_params(toy: Path) -> None:
    specs = read_dag(toy)
    params = {
        "base": {"profile": "default"},
        "prep": {"backend": "rule"},
        "side": {"gen": {"teacher": {"default": "rule", "full": "llm"}}},
        "report": {"engine_backend": "llm"},
        "flow": {"gpu_stages": ["train"]},
    }
    c = classify(specs, params)
    assert c["train"] == {"gpu": True, "llm": False, "retry": True}
    assert c["report"] == {"gpu": True, "llm": True, "retry": True}
    assert c["prep"] == {"gpu": False, "llm": False, "retry": False}
    assert c["side"]["llm"] is False  # the default profile uses the rule teacher
    params["base"]["profile"] = "full"
    params["flow"]["llm_uses_gpu"] = False
    c = classify(specs, params)
    assert c["side"] == {"gpu": False, "llm": True, "retry": True}


def test_project_dag_reads() -> None:
    """The real dvc.yaml parses and every stage's section is classified (whatever stages exist now)."""
    if not (ROOT / ".dvc").is_dir():
        pytest.skip("the project is not `dvc init`ed in this checkout")
    specs = read_dag(ROOT)
    assert specs, "dvc.yaml has no stages"
    classify(specs, yaml.safe_load((ROOT / "params.yaml").read_text()))


def test_overrides_write_params_like_dvc_exp_run(tmp_path: Path) -> None:
    p = tmp_path / "params.yaml"
    p.write_text("# keep me\nsft:\n  epochs: 1  # inline\n  lr: 0.1\ngen_inputs:\n  backend: rule\n")
    applied = apply_overrides(tmp_path, {"sft.epochs": 3, "gen_inputs.backend": "llm"})
    assert applied == ["sft.epochs=3", "gen_inputs.backend=llm"]
    text = p.read_text()
    assert "# keep me" in text and "# inline" in text
    data = yaml.safe_load(text)
    assert data["sft"] == {"epochs": 3, "lr": 0.1}
    assert data["gen_inputs"]["backend"] == "llm"
    apply_overrides(tmp_path, ["sft.lr=0.5", "+sft.extra=[1,2]"])
    assert yaml.safe_load(p.read_text())["sft"] == {"epochs": 3, "lr": 0.5, "extra": [1, 2]}
    with pytest.raises(ValueError, match=r"sft\.no_such_key"):
        apply_overrides(tmp_path, ["sft.no_such_key=1"])


def test_normalize_overrides_forms() -> None:
    assert normalize_overrides(None) == []
    assert normalize_overrides({"a.b": True, "a.c": None, "a.d": "two words", "a.e": [1, "x"]}) == [
        "a.b=true",
        "a.c=null",
        'a.d="two words"',
        "a.e=[1,x]",
    ]
    with pytest.raises(ValueError):
        normalize_overrides(["no-equals"])


@pytest.mark.parametrize(
    "override",
    ["evaluate.limit=null", "grpo.crm.gate=false", "base.profile=full", "gen_inputs.llm.max_tokens=1024"],
)
def test_the_real_params_file_survives_dvc_exp_run_set(tmp_path: Path, override: str) -> None:
    """`dvc exp run -S` rewrites the whole params.yaml: every other value must read back the same.

    Regression: a URL inside a YAML flow mapping ({base_url: "http://..."}) came back unquoted,
    which DVC's own YAML reader (ruamel) rejects, so `dvc exp run -S evaluate.limit=null` broke params.yaml.
    """
    from dvc.utils.serialize import load_yaml

    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    expected = yaml.safe_load((ROOT / "params.yaml").read_text())
    apply_overrides(tmp_path, [override])
    key, value = override.split("=")
    *path, leaf = key.split(".")
    node = expected
    for part in path:
        node = node[part]
    node[leaf] = yaml.safe_load(value)
    assert yaml.safe_load((tmp_path / "params.yaml").read_text()) == expected
    assert load_yaml(tmp_path / "params.yaml") == expected  # what `dvc repro` reads next


def test_classify_reads_gpu_and_llm_marks_from_dvc_yaml_meta(tmp_path: Path) -> None:
    root = make_toy(
        tmp_path,
        {
            "gen": {"meta": {"llm": "gen.backend"}},
            "train": {"deps": ["gen"], "meta": {"gpu": True}},
            "plain": {},
        },
    )
    specs = read_dag(root)
    assert {s.name: s.meta for s in specs} == {"gen": {"llm": "gen.backend"}, "train": {"gpu": True}, "plain": {}}
    params = {"base": {"profile": "default"}, "gen": {"backend": {"default": "mutate", "paper": "llm"}}}
    c = classify(specs, params)
    assert c["train"] == {"gpu": True, "llm": False, "retry": True}
    assert c["gen"] == {"gpu": False, "llm": False, "retry": False}
    assert c["plain"] == {"gpu": False, "llm": False, "retry": False}
    params["base"]["profile"] = "paper"
    assert classify(specs, params)["gen"] == {"gpu": True, "llm": True, "retry": True}
    assert classify(specs, params | {"flow": {"gpu_stages": []}})["train"]["gpu"] is False  # params win


def test_project_marks_gpu_and_llm_stages() -> None:
    """The real dvc.yaml declares the stages that need a GPU or may call an LLM."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    meta = {name: (entry.get("do") or entry).get("meta") or {} for name, entry in stages.items()}
    gpu = {"sft", "grpo", "grpo_codegen", "train_eval", "evaluate", "generalize", "reward_model", "codegen_eval"}
    assert {n for n, m in meta.items() if m.get("gpu")} == gpu
    assert {n: m["llm"] for n, m in meta.items() if m.get("llm")} == {
        "gen_inputs": "gen_inputs.backend",
        "contra_sft": "contra_sft.teacher",
        "crpl_data": "recode.backend",
    }


def test_reasoning_grpo_neither_waits_for_nor_reruns_on_the_reward_model() -> None:
    """In the real dvc.yaml the grpo stage's upstream (every stage whose outs it reads, transitively) holds no
    reward model or CRPL data and no stage that reads ``recode``: a change of ``recode.*`` leaves GRPO up to
    date. Code-generation GRPO (grpo_codegen) is the one that depends on the reward model."""
    from codethinker.ops.dvcfile import read

    stages = read(ROOT)["stages"]
    body = {name: (entry.get("do") or entry) for name, entry in stages.items()}
    producer = {
        (next(iter(o)) if isinstance(o, dict) else o): name for name, b in body.items() for o in b.get("outs") or []
    }

    def upstream(name: str) -> set[str]:
        found: set[str] = set()
        for dep in body[name].get("deps") or []:
            owner = next((p for out, p in producer.items() if dep == out or dep.startswith(out + "/")), None)
            if owner is not None and owner not in found:
                found |= {owner} | upstream(owner)
        return found

    def reads_recode(name: str) -> bool:
        return any(str(p).split(".")[0] == "recode" for p in body[name].get("params") or [] if isinstance(p, str))

    grpo = upstream("grpo")
    assert {"sft", "contra_sft"} <= grpo and not {"reward_model", "crpl_data"} & grpo
    assert not any(reads_recode(s) for s in grpo | {"grpo"})
    assert "reward_model" in upstream("grpo_codegen") and "grpo_codegen" in upstream("codegen_eval")
