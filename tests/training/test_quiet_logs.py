"""Stages are quiet where they should be: the libraries at WARNING, the trainers' bar without the per-step
dict under it; ``CODETHINKER_LOG=debug`` gives the libraries' own lines back."""

from __future__ import annotations

import logging

import pytest
import torch
from transformers import Trainer, TrainingArguments
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from codethinker.logs import LEVEL_ENV, quiet_libraries
from codethinker.training.callbacks import quiet_progress


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Linear(2, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict:
        return {"loss": ((self.w(x).squeeze(-1) - labels) ** 2).mean()}


def _trainer(tmp_path, disable_tqdm: bool = False) -> Trainer:
    data = [{"x": torch.tensor([float(i), 1.0]), "labels": torch.tensor(float(i))} for i in range(8)]
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        max_steps=4,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=disable_tqdm,
    )
    return Trainer(model=_Tiny(), args=args, train_dataset=data)


class TestQuietProgress:
    def test_the_bar_stays_and_the_per_step_dict_goes(self, tmp_path, capsys, monkeypatch):
        monkeypatch.delenv(LEVEL_ENV, raising=False)
        trainer = quiet_progress(_trainer(tmp_path))
        bars = [c for c in trainer.callback_handler.callbacks if isinstance(c, ProgressCallback)]
        assert len(bars) == 1 and type(bars[0]) is not ProgressCallback
        trainer.train()
        out = capsys.readouterr()
        assert "'loss'" not in out.out + out.err  # the dict a plain ProgressCallback writes every step
        assert "4/4" in out.err  # the bar, with its count

    def test_without_the_bar_the_printer_goes_too(self, tmp_path, capsys, monkeypatch):
        monkeypatch.delenv(LEVEL_ENV, raising=False)
        trainer = quiet_progress(_trainer(tmp_path, disable_tqdm=True))
        assert not any(isinstance(c, PrinterCallback | ProgressCallback) for c in trainer.callback_handler.callbacks)
        trainer.train()
        assert "'loss'" not in capsys.readouterr().out

    def test_the_plain_trainer_prints_the_dict_that_is_dropped(self, tmp_path, capsys):
        _trainer(tmp_path).train()  # the behaviour quiet_progress removes, seen here so the test above can fail
        out = capsys.readouterr()
        assert "'loss'" in out.out + out.err

    def test_verbose_keeps_the_trainer_as_it_is(self, tmp_path, monkeypatch):
        monkeypatch.setenv(LEVEL_ENV, "debug")
        trainer = quiet_progress(_trainer(tmp_path))
        assert any(type(c) is ProgressCallback for c in trainer.callback_handler.callbacks)


class TestQuietLibraries:
    @pytest.fixture(autouse=True)
    def _restore(self, monkeypatch):
        for var in ("VLLM_LOGGING_LEVEL", "TRANSFORMERS_VERBOSITY", LEVEL_ENV):
            monkeypatch.delenv(var, raising=False)
        levels = {n: logging.getLogger(n).level for n in ("vllm", "trl")}
        yield
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)

    def test_libraries_at_warning_and_a_users_own_setting_kept(self, monkeypatch):
        import os

        monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "info")
        quiet_libraries()
        assert os.environ["VLLM_LOGGING_LEVEL"] == "WARNING"
        assert os.environ["TRANSFORMERS_VERBOSITY"] == "info"
        assert logging.getLogger("trl").level == logging.WARNING

    def test_codethinker_log_debug_asks_for_the_libraries_lines(self, monkeypatch):
        import os

        monkeypatch.setenv(LEVEL_ENV, "debug")
        logging.getLogger("trl").setLevel(logging.NOTSET)
        quiet_libraries()
        assert os.environ["VLLM_LOGGING_LEVEL"] == "DEBUG"
        assert logging.getLogger("trl").level == logging.NOTSET


class TestMetricsCallbackGroups:
    """The trainer's metrics reach MLflow grouped by prefix, the plot CSV keeps its column names."""

    def test_grouped_for_mlflow_dropped_keys_left_out_csv_unchanged(self, tmp_path):
        import csv
        from types import SimpleNamespace

        from codethinker.training.callbacks import MetricsCallback

        class Sink:  # the MLflow side: what the callback hands to StageRun.log_metrics
            def __init__(self) -> None:
                self.logged: list[tuple[dict, int]] = []

            def log_metrics(self, metrics: dict, step: int | None = None) -> None:
                self.logged.append((metrics, step))

        sink, path = Sink(), tmp_path / "curve.csv"
        cb = MetricsCallback(sink, path, columns=["loss", "rewards.crm.mean"], drop=("clip_ratio/",))
        logs = {"loss": 0.5, "rewards/crm/mean": 1.25, "completions/mean_length": 170.0, "clip_ratio/low_mean": 0.0}
        cb.on_log(None, SimpleNamespace(global_step=3), None, logs=logs)
        assert sink.logged == [
            ({"train/loss": 0.5, "reward/rewards/crm/mean": 1.25, "rollout/completions/mean_length": 170.0}, 3)
        ]
        assert list(csv.DictReader(path.open())) == [{"step": "3", "loss": "0.5", "rewards.crm.mean": "1.25"}]


def test_quiet_libraries_keeps_the_trainers_progress_bar(tmp_path):
    """transformers turns the Trainer's bar off (``disable_tqdm``) when its logger is above WARNING: the quiet
    level must not cost the training stages their progress bar."""
    import os
    import subprocess
    import sys

    code = (
        "from codethinker.logs import quiet_libraries; quiet_libraries()\n"
        "from transformers import TrainingArguments\n"
        f"print(TrainingArguments(output_dir={str(tmp_path)!r}, report_to=[], use_cpu=True).disable_tqdm)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TRANSFORMERS_VERBOSITY", LEVEL_ENV)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "False"


def test_vllm_s_repeated_warnings_are_dropped_and_the_others_kept(monkeypatch):
    """The real vLLM logger: after its import, the per-step weight-reload warnings are gone, a real warning
    is not."""
    import io

    pytest.importorskip("vllm")
    import vllm  # noqa: F401  (vLLM sets up its handlers here)

    from codethinker.logs import drop_library_noise

    monkeypatch.delenv(LEVEL_ENV, raising=False)
    parent = logging.getLogger("vllm")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    parent.addHandler(handler)  # stands beside vLLM's own handler, filtered the same way
    try:
        drop_library_noise()
        child = logging.getLogger("vllm.model_executor.model_loader.layerwise")
        child.warning("ParallelLMHead: Failed to load weights")
        child.warning("KV cache is too small")
    finally:
        parent.removeHandler(handler)
    assert "Failed to load weights" not in stream.getvalue() and "KV cache is too small" in stream.getvalue()


def test_vllm_warnings_go_through_a_filtered_handler_from_the_start():
    """vLLM configures its own handler only while an engine starts, after the lines a start prints: with its
    logging off, ours (filtered) is there before vLLM logs anything, and a repeated line is dropped."""
    import subprocess
    import sys

    code = (
        "import logging, os\n"
        "os.environ.pop('CODETHINKER_LOG', None); os.environ.pop('VLLM_CONFIGURE_LOGGING', None)\n"
        "from codethinker.logs import quiet_libraries\n"
        "quiet_libraries(); quiet_libraries()\n"
        "log = logging.getLogger('vllm.model_executor.model_loader.layerwise')\n"
        "log.warning('ParallelLMHead: Failed to load weights'); log.warning('a real problem')\n"
        "print(os.environ['VLLM_CONFIGURE_LOGGING'], len(logging.getLogger('vllm').handlers))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.stdout.split() == ["0", "1"]  # one handler, however often it is called
    assert "a real problem" in res.stderr and "Failed to load weights" not in res.stderr


def test_a_stage_under_codethinker_repro_filters_vllm_warnings_too():
    """`codethinker repro` quiets the libraries in its own process, so every stage inherits its
    ``VLLM_CONFIGURE_LOGGING=0``: the stage must still install the filtered handler (it did not, and a
    fresh clone's make run printed 236 repeated vLLM lines)."""
    import os
    import subprocess
    import sys

    code = (
        "import logging, os\n"
        "from codethinker.logs import quiet_libraries\n"
        "quiet_libraries()\n"
        "log = logging.getLogger('vllm.model_executor.model_loader.layerwise')\n"
        "log.warning('ParallelLMHead: Failed to load weights'); log.warning('a real problem')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != LEVEL_ENV} | {"VLLM_CONFIGURE_LOGGING": "0"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert "a real problem" in res.stderr and "Failed to load weights" not in res.stderr


@pytest.mark.vllm
@pytest.mark.slow
def test_a_vllm_engine_start_prints_nothing(tiny_model):
    """A real engine start on the CPU build, as a stage makes it: vLLM's notes about the CPU build's choices,
    torch's C++ NUMA note and the Triton line used to print 15 lines at every start; now none."""
    import os
    import subprocess
    import sys

    pytest.importorskip("vllm")
    code = (
        "import sys\n"
        "from codethinker.logs import quiet_libraries; quiet_libraries()\n"
        "from codethinker.engines.vllm import VLLMEngine\n"
        "print('=== start', file=sys.stderr, flush=True)\n"
        f"VLLMEngine({str(tiny_model)!r}, max_model_len=1024, weight_sync=True).close()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (LEVEL_ENV, "VLLM_CONFIGURE_LOGGING", "TORCH_CPP_LOG_LEVEL")}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stderr.split("=== start\n", 1)[1].strip() == ""
