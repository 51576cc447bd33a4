# Two commands do all set-up on a fresh machine:
#   make run    creates/updates .venv, installs kvlab, runs the main job
#   make test   creates/updates .venv, installs kvlab with its test and llama.cpp extras, runs the tests
# torch 2.13.0 (CPU) is installed first so no CUDA build is pulled in.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
KVLAB  := $(VENV)/bin/kvlab
RESULTS ?= results
# Shorten the llama.cpp build: no tests, no examples, no curl; both cores.
export CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF
export LLAMA_CPP_BUILD_JOBS ?= 2

.PHONY: run test lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.stamp-torch: | $(PY)
	$(PIP) install --quiet torch==2.13.0
	touch $@

$(VENV)/.stamp-install: pyproject.toml $(VENV)/.stamp-torch
	$(PIP) install --quiet -e '.[llamacpp,dev]'
	touch $@

run: $(VENV)/.stamp-install
	@mkdir -p $(RESULTS)
	$(KVLAB) prove
	$(KVLAB) memory --preset llama-3.1-8b --preset qwen2.5-7b --preset gemma-3-270m --dtype bf16 -L 2048 -L 8192 -L 32768
	$(KVLAB) memory --measure
	$(KVLAB) kv-bench --out $(RESULTS)/kv-bench
	@echo "Results are in $(RESULTS)/"

test: $(VENV)/.stamp-install
	$(PY) -m pytest

lint: $(VENV)/.stamp-install
	$(VENV)/bin/ruff check src tests

clean:
	rm -rf $(VENV) $(RESULTS) runs
