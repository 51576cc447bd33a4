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
	$(KVLAB) memory
	$(KVLAB) memory -p gemma-3-270m -L 512 -L 4096 --llamacpp
	$(KVLAB) memory -p toy -L 192 --dtype f32 --measure
	$(KVLAB) kv-bench --out $(RESULTS)/kv-bench
	$(KVLAB) run experiments/quickstart.toml --out $(RESULTS)/runs
	$(KVLAB) fetch
	$(KVLAB) run experiments/llamacpp-cpu.toml --queries 8 --out $(RESULTS)/runs
	@echo
	@echo "Results: $(RESULTS)/kv-bench/ and $(RESULTS)/runs/ (each run: report.md, report.html, records.jsonl)"

test: $(VENV)/.stamp-install
	$(PY) -m pytest

lint: $(VENV)/.stamp-install
	$(VENV)/bin/ruff check src tests

clean:
	rm -rf $(VENV) $(RESULTS) runs
