"""codethinker.tracking on a real MLflow SQLite store: parent/child runs, reaping, failures, registry."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codethinker.ops import procs
from codethinker.ops.runs import pipeline_run, stage_run
from codethinker.tracking import TrackingUnavailable, register_adapter

ROOT = Path(__file__).resolve().parents[2]


def _runs(root: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("codethinker")
    return client, client.search_runs([exp.experiment_id], max_results=1000)


def _by_name(runs):
    out: dict[str, list] = {}
    for r in runs:
        out.setdefault(r.data.tags["mlflow.runName"], []).append(r)
    return out


def test_stage_runs_hang_under_exactly_the_given_parent_with_params_metrics_artifacts(
    tracking_on: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tracking_on
    (root / "dvc.yaml").write_text(
        "stages:\n  a:\n    cmd: x\n    outs: [out/a.jsonl]\n    metrics: [{metrics/a.json: {cache: false}}]\n"
    )
    with pipeline_run("other pipeline"), pipeline_run("given pipeline") as given:  # two open parents: one is given
        monkeypatch.setenv("CODETHINKER_PARENT_RUN_ID", given.run_id)
        with stage_run("a", {"min_lines": 5, "base": {"seed": 0}}) as run:
            (root / "out").mkdir()
            (root / "out/a.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
            (root / "metrics").mkdir()
            (root / "metrics/a.json").write_text(json.dumps({"kept": 2, "dropped": {"too short": 3}, "note": "text"}))
            run.log_metrics({"loss": 0.5}, step=1)
            run.log_metrics({"loss": 0.25}, step=2)
        with stage_run("b", {"k": "v"}):
            pass
    client, runs = _runs(root)
    by = _by_name(runs)
    pid = given.run_id
    assert by["given pipeline"][0].info.status == by["other pipeline"][0].info.status == "FINISHED"
    a, b = by["a"][0], by["b"][0]
    assert a.data.tags["mlflow.parentRunId"] == pid == b.data.tags["mlflow.parentRunId"]
    assert sum(r.data.tags.get("mlflow.parentRunId") == pid for r in runs) == 2  # nothing under the other
    assert a.info.status == b.info.status == "FINISHED"
    assert a.data.params == {"min_lines": "5", "base.seed": "0"}
    assert a.data.metrics["kept"] == 2 and a.data.metrics["dropped.too short"] == 3
    assert [m.value for m in client.get_metric_history(a.info.run_id, "loss")] == [0.5, 0.25]
    arts = {f.path for f in client.list_artifacts(a.info.run_id)}
    assert {"manifest.json", "metrics", "outs"} <= arts
    manifest = client.download_artifacts(a.info.run_id, "manifest.json", str(root / "dl"))
    files = json.loads(Path(manifest).read_text())["files"]
    assert files["out/a.jsonl"]["lines"] == 2


def test_owned_parent_from_env_is_ended_by_its_owner(tracking_on: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pipeline_run("pipeline test", params={"overrides": "none"}) as parent:
        monkeypatch.setenv("CODETHINKER_PARENT_RUN_ID", parent.run_id)
        with stage_run("a"):
            pass
        client, _ = _runs(tracking_on)
        assert client.get_run(parent.run_id).info.status == "RUNNING"  # stages leave it to the owner
    assert client.get_run(parent.run_id).info.status == "FINISHED"
    child = _by_name(_runs(tracking_on)[1])["a"][0]
    assert child.data.tags["mlflow.parentRunId"] == parent.run_id
    with pytest.raises(RuntimeError), pipeline_run("failing") as failing:
        raise RuntimeError("boom")
    assert client.get_run(failing.run_id).info.status == "FAILED"


def test_a_stage_without_a_parent_id_makes_a_top_level_run_and_touches_no_other_run(
    tracking_on: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``$CODETHINKER_PARENT_RUN_ID``: even with a pipeline run of this very process open (what a
    lookup by process would find), the stage's run is top-level and that pipeline run is left as it was."""
    with pipeline_run("open pipeline", params={"k": "v"}) as other:
        client, _ = _runs(tracking_on)
        before = client.get_run(other.run_id)
        with stage_run("good", {"p": 1}):
            pass
        with pytest.raises(ValueError), stage_run("bad"):
            raise ValueError("x")
        monkeypatch.setenv("CODETHINKER_PARENT_RUN_ID", "0" * 32)  # not in this store: top-level too
        with stage_run("orphan"):
            pass
        after = client.get_run(other.run_id)
        assert after.info.status == "RUNNING"
        assert (after.data.tags, after.data.params, after.data.metrics) == (
            before.data.tags,
            before.data.params,
            before.data.metrics,
        )
    by = _by_name(_runs(tracking_on)[1])
    assert (by["good"][0].info.status, by["bad"][0].info.status, by["orphan"][0].info.status) == (
        "FINISHED",
        "FAILED",
        "FINISHED",
    )
    for name in ("good", "bad", "orphan"):
        run = by[name][0]
        assert "mlflow.parentRunId" not in run.data.tags
        assert run.data.tags["codethinker.kind"] == "stage" and run.data.tags["codethinker.stage"] == name
        assert "codethinker.pipeline" not in run.data.tags
    assert by["good"][0].data.params == {"p": "1"}
    assert sum(1 for r in _runs(tracking_on)[1] if r.data.tags.get("codethinker.pipeline") == "1") == 1


def test_runs_of_dead_owners_are_reaped(tracking_on: Path) -> None:
    with stage_run("first"):
        pass
    client, runs = _runs(tracking_on)
    exp_id = runs[0].info.experiment_id
    dead = client.create_run(
        exp_id,
        run_name="killed flow",
        tags={"codethinker.pipeline": "1", "codethinker.owner": f"{socket.gethostname()}:999999999:1"},
    )
    other_host = client.create_run(exp_id, run_name="elsewhere", tags={"codethinker.owner": "some-other-host:1:1"})
    with stage_run("second"):
        pass
    assert client.get_run(dead.info.run_id).info.status == "KILLED"
    assert client.get_run(other_host.info.run_id).info.status == "RUNNING"  # cannot tell: left alone


@pytest.mark.slow
def test_sigterm_ends_stage_run_killed(tracking_on: Path) -> None:
    code = (
        "import os, signal\n"
        "from codethinker.ops.runs import stage_run\n"
        "with stage_run('term'):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tracking_on, env=env, timeout=300)
    assert proc.returncode == 128 + 15
    by = _by_name(_runs(tracking_on)[1])
    assert by["term"][0].info.status == "KILLED"
    assert "mlflow.parentRunId" not in by["term"][0].data.tags and set(by) == {"term"}


def test_ctrl_c_ends_stage_run_killed(tracking_on: Path) -> None:
    with pytest.raises(KeyboardInterrupt), stage_run("interrupted"):
        raise KeyboardInterrupt
    assert _by_name(_runs(tracking_on)[1])["interrupted"][0].info.status == "KILLED"


def test_closed_port_fails_fast_naming_the_uri(
    tracking_on: Path, monkeypatch: pytest.MonkeyPatch, free_port: int
) -> None:
    uri = f"http://127.0.0.1:{free_port}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    t0 = time.monotonic()
    with pytest.raises(TrackingUnavailable, match=f"127.0.0.1:{free_port}"), stage_run("a"):
        pytest.fail("the stage body must not run")
    assert time.monotonic() - t0 < 120  # generous: "fast" means no retry loop, not a benchmark


def test_silent_server_times_out_instead_of_hanging(tracking_on: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as srv:  # accepts connections (backlog) but never answers
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{srv.getsockname()[1]}")
        t0 = time.monotonic()
        with pytest.raises(TrackingUnavailable, match="unreachable"), stage_run("a"):
            pass
        assert time.monotonic() - t0 < 120


def test_fallback_local_writes_to_sqlite(tracking_on: Path, monkeypatch: pytest.MonkeyPatch, free_port: int) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port}")
    monkeypatch.setenv("CODETHINKER_TRACKING_FALLBACK", "local")
    with stage_run("a", {"k": 1}) as run:
        run.log_metrics({"m": 1})
    run_a = _by_name(_runs(tracking_on)[1])["a"][0]
    assert run_a.data.tags["codethinker.fallback_from"] == f"http://127.0.0.1:{free_port}"
    assert run_a.data.metrics == {"m": 1.0}


def test_register_adapter_creates_versions(tracking_on: Path) -> None:
    adapter = tracking_on / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "models/base", "r": 8}))
    (adapter / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    assert register_adapter(adapter, "toy-sft") is None  # no stage run active
    with stage_run("sft"):
        v1 = register_adapter(adapter, "toy-sft", tags={"step": 10})
    with stage_run("grpo") as run:
        v2 = run.register_adapter(adapter, "toy-sft")
    assert (v1, v2) == ("1", "2")
    import mlflow
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(f"sqlite:///{tracking_on / 'mlflow.db'}")
    mv = MlflowClient().get_model_version("toy-sft", "1")
    assert mv.tags["base_model"] == "models/base" and mv.tags["step"] == "10"
    local = mlflow.artifacts.download_artifacts("models:/toy-sft/2", dst_path=str(tracking_on / "dl"))
    assert sorted(p.name for p in Path(local).iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]


def test_tracking_off_is_a_no_op(tracking_on: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODETHINKER_TRACKING", "off")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # never contacted
    empty_size = tracking_on.joinpath("mlflow.db").stat().st_size
    with stage_run("a", {"k": 1}) as run:
        run.log_metrics({"m": 1})
        assert register_adapter(tracking_on, "x") is None
    with pipeline_run() as parent:
        assert parent.run_id is None
    assert tracking_on.joinpath("mlflow.db").stat().st_size == empty_size


def test_owner_keys() -> None:
    me = procs.process_key(os.getpid())
    assert me and procs.process_alive(me)
    assert not procs.process_alive(f"{socket.gethostname()}:999999999:1")
    assert procs.process_alive("another-host:1:1")


def test_autolog_resolves_foreach_stages_and_metrics_folders(tracking_on: Path) -> None:
    root = tracking_on
    (root / "dvc.yaml").write_text(
        "stages:\n  evaluate:\n    foreach: [m1, m2]\n    do:\n      cmd: x ${key}\n"
        "      outs:\n        - data/eval/${key}\n"
        "      metrics:\n        - metrics/eval/${key}:\n            cache: false\n"
    )
    (root / "data/eval/m1").mkdir(parents=True)
    (root / "data/eval/m1/predictions.jsonl").write_text('{"id": "a/0"}\n')
    (root / "metrics/eval/m1").mkdir(parents=True)
    (root / "metrics/eval/m1/cruxeval.json").write_text(json.dumps({"pass1_mean": 0.5}))
    with stage_run("evaluate@m1"):
        pass
    client, runs = _runs(root)
    run = _by_name(runs)["evaluate@m1"][0]
    assert run.data.metrics == {"cruxeval.pass1_mean": 0.5}
    assert {f.path for f in client.list_artifacts(run.info.run_id)} == {"manifest.json", "metrics", "outs"}
    assert [f.path for f in client.list_artifacts(run.info.run_id, "outs/m1")] == ["outs/m1/predictions.jsonl"]
    manifest = json.loads(
        Path(client.download_artifacts(run.info.run_id, "manifest.json", str(root / "dl"))).read_text()
    )
    assert list(manifest["files"]) == ["data/eval/m1/predictions.jsonl"]


def test_autolog_registers_an_adapter_out(tracking_on: Path) -> None:
    """A stage whose dvc.yaml outs hold a PEFT adapter gets a registry version without stage code."""
    root = tracking_on
    (root / "dvc.yaml").write_text(
        "stages:\n  sft:\n    cmd: x\n    outs:\n      - models/sft/adapter\n      - models/sft/merged\n"
        "  grpo:\n    cmd: y\n    outs:\n      - models/grpo/adapter\n"
    )
    for stage in ("sft", "grpo"):
        adapter = root / "models" / stage / "adapter"
        adapter.mkdir(parents=True)
        (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "models/base"}))
        (adapter / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    (root / "models/sft/merged").mkdir()
    (root / "models/sft/merged/config.json").write_text("{}")  # not an adapter: not registered
    with stage_run("sft") as run:
        run.log_artifact(root / "models/sft/adapter", "adapter")  # what stages/sft.py does itself
    with stage_run("grpo"):
        pass
    with stage_run("sft"):
        pass
    import mlflow

    client, runs = _runs(root)
    assert sorted(m.name for m in client.search_registered_models()) == ["codethinker-grpo", "codethinker-sft"]
    versions = {str(v.version): v for v in client.search_model_versions("name = 'codethinker-sft'")}
    assert sorted(versions) == ["1", "2"]
    assert versions["1"].tags["base_model"] == "models/base"
    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
    local = mlflow.artifacts.download_artifacts("models:/codethinker-grpo/1", dst_path=str(root / "dl"))
    assert sorted(p.name for p in Path(local).iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]
    sft_run = _by_name(runs)["sft"][0]
    assert [a.path for a in client.list_artifacts(sft_run.info.run_id, "adapter")] == [
        "adapter/adapter_config.json",
        "adapter/adapter_model.safetensors",
    ]


def test_a_top_level_stage_run_records_the_commit(tracking_on: Path) -> None:
    root = tracking_on
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", "--allow-empty"],
        check=True,
    )
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    with stage_run("a"):
        pass
    _, runs = _runs(root)
    (run,) = runs
    assert run.data.tags["mlflow.runName"] == "a" and run.data.tags["mlflow.source.git.commit"] == head


def test_autolog_registers_a_trained_full_model_with_its_model_card(tracking_on: Path) -> None:
    """A fully fine-tuned model (no adapter) of a training stage is registered with a model card; the
    random model of bootstrap is not."""
    root = tracking_on
    (root / "dvc.yaml").write_text(
        "stages:\n  sft:\n    cmd: x\n    outs:\n      - models/sft/merged\n"
        "  bootstrap:\n    cmd: y\n    outs:\n      - models/base\n"
    )
    for folder in ("models/sft/merged", "models/base"):
        (root / folder).mkdir(parents=True)
        (root / folder / "config.json").write_text(
            json.dumps({"architectures": ["Qwen2ForCausalLM"], "num_hidden_layers": 4, "hidden_size": 128})
        )
        (root / folder / "model.safetensors").write_bytes(b"\0" * 64)
    with stage_run("sft", {"learning_rate": 0.003, "finetune": "full"}):
        pass
    with stage_run("bootstrap"):
        pass
    client, _ = _runs(root)
    assert [m.name for m in client.search_registered_models()] == ["codethinker-sft"]
    (version,) = client.search_model_versions("name = 'codethinker-sft'")
    assert version.source.endswith("/model") and version.tags["codethinker.kind"] == "model"
    assert not (root / "models/sft/merged/README.md").exists()  # the DVC out is left as the trainer wrote it
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
    local = mlflow.artifacts.download_artifacts("models:/codethinker-sft/1", dst_path=str(root / "dl"))
    assert sorted(p.name for p in Path(local).iterdir()) == ["README.md", "config.json", "model.safetensors"]
    card = (Path(local) / "README.md").read_text()
    assert "Qwen2ForCausalLM, 4 layers x 128" in card and "| `learning_rate` | `0.003` |" in card
