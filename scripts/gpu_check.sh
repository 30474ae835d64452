#!/usr/bin/env bash
# GPU check: the GPU path of the pipeline, on one GPU, in under 10 minutes, without network.
#
#   bash scripts/gpu_check.sh            # from the repository root; log: gpu_check/log.txt
#   bash scripts/gpu_check.sh --no-vllm  # a machine with torch, transformers, peft, TRL, datasets only
#
# Needs what `make run` (or `dvc pull`) leaves: data/contra_sft/{grpo_train,grpo_eval}.parquet and the
# embedded default's SFT model models/sft/merged; the project's environment ($PY, default .venv/bin/python,
# with vLLM's CUDA build) and verl's ($VERL_PYTHON, default .venv-verl/bin/python, verl + vLLM CUDA).
# Steps (each prints PASS or FAIL; the script exits 1 if any failed):
#   1 gpu       a CUDA device is visible to torch in both environments
#   2 verl      verl GRPO (FSDP + vLLM async rollout, DBS agent loop, CRM reward): 3 steps on 1 GPU
#   3 export    verl's last checkpoint exported to models/grpo/{adapter,merged} (transformers loads it)
#   4 eval      train_eval on the merged model: a slice of held-out prompts, vLLM CUDA
#   5 local     the local backend (TRL + vLLM with sleep mode): 2 steps; its GPU memory plan is logged
# --no-vllm (under 8 minutes on one H200; needs data/contra_sft/{sft.jsonl,grpo_train,grpo_eval.parquet} and
# models/sft/merged, no verl):
#   1 gpu       a CUDA device is visible to torch
#   2 bench     benchmarks/bench_gpu.py on the 0.5B shape: project SFT vs the bare loop (eager, compiled), the HF
#               engine vs plain generate, peak memory (gpu_check/bench.json)
#   3 sft       the sft stage, 40 steps on from the SFT policy (precision auto: bf16-mixed)
#   4 local     the local backend with transformers' generate (rollout_engine hf): 2 steps
#   5 eval      train_eval with transformers' generate on a slice of held-out prompts
# It works in a scratch folder (gpu_check/) with its own params.yaml; nothing in the project is changed. Each stage
# gets the paths of its cmd in dvc.yaml (`args STAGE`).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
export VERL_PYTHON=${VERL_PYTHON:-$ROOT/.venv-verl/bin/python}
WORK=${WORK:-$ROOT/gpu_check}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$ROOT MLFLOW_TRACKING_URI=sqlite:///$WORK/mlflow.db
rm -rf "$WORK" && mkdir -p "$WORK/data/contra_sft" "$WORK/models/sft"
exec > >(tee "$WORK/log.txt") 2>&1
FAILED=0
step() {  # step NAME TIMEOUT_S COMMAND...
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  echo "=== $name: $*"
  if (cd "$WORK" && timeout "$limit" "$@"); then echo "PASS $name ($((SECONDS - t0)) s)"
  else echo "FAIL $name ($((SECONDS - t0)) s)"; FAILED=1; fi
}
NO_VLLM=$([ "${1:-}" = --no-vllm ] && echo 1 || echo 0)
for f in grpo_train.parquet grpo_eval.parquet $([ $NO_VLLM = 1 ] && echo sft.jsonl); do
  cp "$ROOT/data/contra_sft/$f" "$WORK/data/contra_sft/" || exit 2
done
cp -r "$ROOT/models/sft/merged" "$WORK/models/sft/merged" || exit 2
params() {  # params KEY=VALUE...: the project's params.yaml with these keys set (dotted paths)
  "$PY" - "$WORK/params.yaml" "$@" <<'EOF'
import sys, yaml
data = yaml.safe_load(open("params.yaml"))
for item in sys.argv[2:]:
    key, value = item.split("=", 1)
    *parents, last = key.split(".")
    node = data
    for k in parents:
        node = node.setdefault(k, {})
    node[last] = yaml.safe_load(value)
open(sys.argv[1], "w").write(yaml.safe_dump(data, sort_keys=False))
EOF
}
args() {  # args STAGE: the arguments of STAGE's cmd in dvc.yaml (the files it reads and writes)
  "$PY" -c 'import shlex, sys; from codethinker.ops.dvcfile import stage_argv; print(shlex.join(stage_argv(*sys.argv[1:])))' \
    "$1" "$ROOT"
}
cd "$ROOT"
COMMON=(grpo.max_steps=3 grpo.prompts_per_step=4 grpo.save_steps=1 train_eval.max_prompts='{synth: 16, leetcode: 4}'
        "train_eval.models={before_sft: models/sft/merged, after_sft: models/sft/merged, after_grpo: models/grpo/merged}")
if [ $NO_VLLM = 1 ]; then
  params "${COMMON[@]}" grpo.backend=local grpo.max_steps=2 grpo.rollout_engine=hf train_eval.engine=hf \
    sft.max_steps=40 sft.save_steps=1000 sft.model=models/sft/merged
  step gpu 60 "$PY" -c 'import torch; assert torch.cuda.is_available(); print(torch.cuda.get_device_name(0))'
  step bench 240 "$PY" "$ROOT/benchmarks/bench_gpu.py" --shape 0.5b --skip vllm --json "$WORK/bench.json"
  step sft 120 "$PY" -m stages.sft $(args sft) --out models/sft_check
  step local 200 "$PY" -m stages.grpo $(args grpo)
  step eval 120 "$PY" -m stages.train_eval $(args train_eval)
  echo "gpu_check --no-vllm: $([ $FAILED = 0 ] && echo PASS || echo FAIL) (log: $WORK/log.txt)"
  exit $FAILED
fi
params "${COMMON[@]}" grpo.backend=verl grpo.verl.gpus_per_node=1 grpo.verl.ppo_mini_batch_size=4 \
  grpo.verl.micro_batch_size_per_gpu=4 grpo.verl.gpu_memory_utilization=0.4 'grpo.verl.loggers=[console]'
step gpu 120 bash -c "'$PY' -c 'import torch; assert torch.cuda.is_available(); print(torch.cuda.get_device_name(0))' \
  && '$VERL_PYTHON' -c 'import torch, verl, vllm; assert torch.cuda.is_available(); print(verl.__version__, vllm.__version__)'"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv 2>/dev/null || true
step verl 300 "$PY" -m stages.grpo $(args grpo)
step export 30 "$PY" -c "from transformers import AutoModelForCausalLM as M; M.from_pretrained('models/grpo/merged'); print('ok')"
step eval 150 "$PY" -m stages.train_eval $(args train_eval)
params "${COMMON[@]}" grpo.backend=local grpo.max_steps=2 grpo.rollout_engine=vllm grpo.vllm_sleep=true \
  grpo.gradient_checkpointing=true
step local 200 "$PY" -m stages.grpo $(args grpo) --out models/grpo_local
grep -h "grpo GPU memory\|KV cache" "$WORK/log.txt" | sort -u | head -20 || true  # the plan beside vLLM's figure
echo "gpu_check: $([ $FAILED = 0 ] && echo PASS || echo FAIL) (log: $WORK/log.txt)"
exit $FAILED
