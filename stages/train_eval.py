"""Stage train_eval: the policy before SFT, after SFT and after GRPO on held-out GRPO prompts.

Run: ``python -m stages.train_eval --data data/contra_sft/grpo_eval.parquet --trained
data/contra_sft/grpo_train.parquet --metrics metrics/train_eval.json --answers data/train_eval/answers.jsonl.gz``
(its cmd in dvc.yaml: ``dvc repro train_eval``). Reads ``params.yaml``
``train_eval`` (``models``: the policy of each phase), ``model.base`` and the task and reward GRPO trained with
(``grpo.task``, ``grpo.reward``, ``grpo.whitebox``): the task's held-out rows, their prompts put in that reward's
format and scored with it. Input: the held-out GRPO prompts (functions held out of SFT and GRPO training); with
``train_eval.trained_prompts`` N > 0 also the first N prompts GRPO draws from (``grpo.sources``,
``grpo.max_prompts``), scored as the set ``trained``: the greedy change where GRPO trained beside the held-out
sets' (docs/training.md, "Where GRPO moves greedy answers"). Writes
every answer with its score's parts, so that anyone can re-score it, and the DVC metrics (``reward_kind``,
``prompt_format``; per phase and held-out set (shape_disjoint, in_distribution, leetcode): format-valid rate, mean
reward, RCS, answer accuracy, truncated share, mean response tokens, each with its 95% bootstrap interval; the
paired interval of GRPO - SFT) and logs them to MLflow as the ``train_eval`` child run.
"""

from __future__ import annotations

import gzip
import json

from codethinker.config.grpo import GRPOConfig, TrainEvalConfig
from codethinker.config.loader import SECTIONS, ParamsFile
from codethinker.data.io import atomic_write, write_json
from codethinker.engines.kv_cache import KVCacheError
from codethinker.ops.stage import path, stage_args, stage_main, stage_run
from codethinker.tasks import get_task
from codethinker.training.grpo_data import grpo_prompt_rows
from codethinker.training.train_eval import METRICS as METRIC_NAMES
from codethinker.training.train_eval import run_train_eval

SOURCES = ("shape_disjoint", "in_distribution", "leetcode", "synth", "trained")  # sets (older runs: sources)
ARGS = stage_args(
    "train_eval",
    __doc__,
    data=path("the held-out GRPO prompts (verl's parquet schema)", rows=True),
    trained=path("GRPO's training prompts (read when train_eval.trained_prompts > 0)", made_by="contra_sft"),
    metrics=path("per phase and held-out set: the means and their 95% intervals (JSON)"),
    answers=path("every scored answer: model, pass, prompt id and set, text, score parts (gzipped JSONL)"),
)


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    params = ParamsFile.read(sections=SECTIONS)  # read once: train_eval's section and grpo's prompt choice
    cfg = params.section(TrainEvalConfig)  # reward, whitebox: grpo's (the reward the policy was trained with)
    models, p = dict(cfg.models), cfg.params
    task = get_task(p.task)
    rows = task.rows(paths.data, "heldout")
    if p.trained_prompts:
        g = params.section(GRPOConfig).params
        trained = grpo_prompt_rows(task.rows(paths.trained, "train"), g.sources, g.max_prompts)
        rows += [{**r, "heldout": "trained"} for r in trained[: p.trained_prompts]]
    with stage_run("train_eval", cfg.as_dict()), atomic_write(paths.answers, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:  # mtime 0: the same answers, the same bytes
            write = lambda a: gz.write((json.dumps(a, ensure_ascii=False) + "\n").encode())  # noqa: E731
            try:
                result = run_train_eval(models, rows, p, write)
            except KVCacheError as exc:  # the machine cannot give the engine's KV cache
                raise SystemExit(f"train_eval: {exc}") from None
        write_json(paths.metrics, result)
    print(summary(result))


def summary(result: dict) -> str:
    """The console table: per source, each phase's means [95% CI] and the paired GRPO - SFT reward."""
    limits = ", ".join(f"{k} {v}" for k, v in result["max_tokens"].items())
    scored = f"reward {result.get('reward_kind', 'crm')}, {result.get('prompt_format', 'contra')} prompts"
    lines = [f"train_eval: {scored}; response limits (tokens) {limits}; mean [95% CI] over held-out prompts"]
    phases = {k: m for k, m in result.items() if k not in ("max_tokens", "grpo_vs_sft") and isinstance(m, dict)}
    for source in dict.fromkeys(k for m in phases.values() for k in m if k in SOURCES):
        lines.append(f"-- {source}\n{'phase':12} " + "  ".join(f"{c:>22}" for c in METRIC_NAMES))
        for name, m in phases.items():
            if source in m:
                row = m[source]
                cells = [f"{row[c]:.3f} [{row[c + '_ci_low']:.2f}, {row[c + '_ci_high']:.2f}]" for c in METRIC_NAMES]
                lines.append(f"{name:12} " + "  ".join(f"{c:>22}" for c in cells))
                if "sampled_reward" in row:
                    cells = [_ci(row, "sampled_" + c, "{:.3f} [{:.2f}, {:.2f}]") for c in METRIC_NAMES]
                    lines.append(f"{'  sampled':12} " + "  ".join(f"{c:>22}" for c in cells))
        diff = result.get("grpo_vs_sft", {}).get(source)
        if diff:
            lines.append(f"{'GRPO - SFT':12} reward {_ci(diff, 'reward_diff', '{:+.3f} [{:+.3f}, {:+.3f}]')}")
            if "sampled_reward_diff" in diff:
                cell = _ci(diff, "sampled_reward_diff", "{:+.3f} [{:+.3f}, {:+.3f}]")
                lines.append(f"{'GRPO - SFT':12} sampled reward {cell}")
    return "\n".join(lines)


def _ci(row: dict, key: str, fmt: str) -> str:
    return fmt.format(row[key], row[key + "_ci_low"], row[key + "_ci_high"])


if __name__ == "__main__":
    main()
