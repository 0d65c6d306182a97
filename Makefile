# `make run` and `make test` set up everything they need in .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# On a GPU machine, install the CuPy wheel that matches the driver's CUDA major version.
CUDA_MAJOR := $(shell nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' | head -n 1)
GPU_EXTRA := $(if $(filter 12,$(CUDA_MAJOR)),cuda12,$(if $(filter 13,$(CUDA_MAJOR)),cuda13,))
comma := ,
RUN_EXTRAS := $(if $(GPU_EXTRA),[$(GPU_EXTRA)])
DEV_EXTRAS := [dev$(if $(GPU_EXTRA),$(comma)$(GPU_EXTRA))]

.PHONY: run test test-gpu mutate-judge mutate-judge-generated bench-gpu reproduce-gpu scale-dask-cuda out-of-core kmcuda report venv clean

# pip and setuptools print dozens of lines even with -q (32 of make run's first 73): they go to
# a log, shown whole only if the install fails.
PIP_LOG := $(VENV)/pip.log
QUIET_PIP = $(BIN)/python -m pip install $(1) >> $(PIP_LOG) 2>&1 || { cat $(PIP_LOG); echo "pip failed: its log is $(PIP_LOG)"; exit 1; }

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "kmbench needs Python 3.11 or newer; run make with PYTHON=python3.11 (found " + sys.version.split()[0] + ")")'
	@echo "setting up $(VENV) for kmbench (once; pip's log: $(PIP_LOG))"
	@$(PYTHON) -m venv $(VENV)
	@$(call QUIET_PIP,--upgrade pip)

$(VENV)/.run-installed: pyproject.toml | $(BIN)/python
	@$(call QUIET_PIP,-e ".$(RUN_EXTRAS)")
	@touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	@$(call QUIET_PIP,-e ".$(DEV_EXTRAS)")
	@touch $@ $(VENV)/.run-installed

venv: $(VENV)/.run-installed

run: $(VENV)/.run-installed  ## benchmark every implementation at n = 100,000 and print the table
	$(BIN)/kmbench run --n 100000

report: $(VENV)/.run-installed  ## render results/records.jsonl as markdown into results/report.md
	$(BIN)/kmbench report --out results/report.md

test: $(VENV)/.dev-installed  ## the test suite (GPU tests skip themselves without a GPU)
	$(BIN)/python -m pytest -q

mutate-judge: $(VENV)/.dev-installed  ## plant one-line slips in the judge; its tests must catch each (results/cpu-2core/mutation)
	$(BIN)/python tools/mutate_judge.py --out results/cpu-2core/mutation

# mutmut's own mutants (pyproject.toml's [tool.mutmut]); JOBS at once, cached in mutants/ so a
# second run tests only what changed. MUTANTS='kmbench.protocol.clock*' reruns those alone.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MUTANTS ?=
MUTATION_OUT ?= results/cpu-2core/mutation-generated
mutate-judge-generated: $(VENV)/.dev-installed  ## mutmut's mutants of the judge (JOBS=N), reported in $(MUTATION_OUT)
	$(BIN)/python tools/mutate_generated.py --jobs $(JOBS) --out $(MUTATION_OUT) $(foreach m,$(MUTANTS),--only '$(m)')

# On a GPU machine whose python3 already has CuPy (no virtual environment needed).
GPU_PATH := PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH}
GPU_RESULTS ?= results/gpu

test-gpu:  ## the GPU tests (they fail rather than skip if no GPU is usable)
	$(GPU_PATH) KMBENCH_REQUIRE_GPU=1 $(PYTHON) -m pytest -q -m gpu -p no:cacheprovider

bench-gpu:  ## v1-v3 at n = 1e5, 1e6, 1e7 and k = 5, 100, then document 000's table, into $(GPU_RESULTS)
	$(GPU_PATH) $(PYTHON) -m kmbench run --n 100000,1000000,10000000 --k 5 --impl cuda-v1,cuda-v2,cuda-v3 --store $(GPU_RESULTS)/records.jsonl
	$(GPU_PATH) $(PYTHON) -m kmbench run --n 100000,1000000,10000000 --k 100 --impl cuda-v1,cuda-v2,cuda-v3 --store $(GPU_RESULTS)/records.jsonl
	$(GPU_PATH) $(PYTHON) -m kmbench reproduce python-cpp-cuda --store $(GPU_RESULTS)/records.jsonl --out $(GPU_RESULTS)/reproduce.md
	$(GPU_PATH) $(PYTHON) -m kmbench report --store $(GPU_RESULTS)/records.jsonl --out $(GPU_RESULTS)/report.md

reproduce-gpu:  ## document 002 on the radial tree (1M and 100M points), into $(GPU_RESULTS); resumable
	$(GPU_PATH) $(PYTHON) -m kmbench reproduce radial-tree --store $(GPU_RESULTS)/records.jsonl --out $(GPU_RESULTS)/reproduce-radial-tree.md

# kmcuda needs its source distribution: pip downloads it, or name a copy (a machine without network).
KMCUDA_SDIST ?=

kmcuda:  ## build kmcuda (document 004's library) for this GPU from its PyPI sources; KMCUDA_SDIST=file offline
	$(GPU_PATH) $(PYTHON) -m impls.peers.kmcuda.build $(if $(KMCUDA_SDIST),--sdist $(KMCUDA_SDIST))

# GPU sets for the scaling run: one GPU, then two (add 0,1,2,3 on a four-GPU machine).
DASK_GPU_SETS ?= 0 0,1
# Every n times this (0.1: radial 1e8 and 1e7 x 128; 0.01: a smoke run of the same code).
SCALING_SCALE ?= 1
# The multi-GPU rows run on each set (the Dask-reduction row dask-cuda is left out: minutes per
# iteration at these sizes), and the cells, workload:k, each run by a command of its own.
SCALING_IMPLS ?= kmbench-gpu-dask,flash-kmeans-multi-gpu
SCALING_CELLS ?= radial-1e9:3 radial-1e9:1000 blobs-1e8x128:1024

scale-dask-cuda:  ## strong scaling of the multi-GPU rows at 1e9 x 2 (k = 3, 1000) and 1e8 x 128 (k = 1024) per GPU set, against kmbench-gpu alone, into $(GPU_RESULTS)/scaling; one command per workload and k, finished cells skipped on a re-run
	@status=0; for cell in $(SCALING_CELLS); do \
	  echo "kmbench scale --workload $${cell%%:*} --k $${cell##*:} --gpus \"$(DASK_GPU_SETS)\""; \
	  $(GPU_PATH) $(PYTHON) -m kmbench scale --workload $${cell%%:*} --k $${cell##*:} --gpus "$(DASK_GPU_SETS)" \
	    --scale $(SCALING_SCALE) --impl $(SCALING_IMPLS) \
	    --store $(GPU_RESULTS)/scaling/records.jsonl --out $(GPU_RESULTS)/scaling/scaling.md || status=$$?; \
	done; exit $$status

# Shares of the GPU's memory the out-of-core data take (1.2: larger than the GPU).
OUT_OF_CORE_SHARES ?= 1.2

out-of-core:  ## kmbench-gpu-stream on d = 128, k = 1024 blobs of 1.2x the GPU's memory, against the copy floor, into $(GPU_RESULTS)/out-of-core
	$(GPU_PATH) $(PYTHON) -m kmbench out-of-core --share $(OUT_OF_CORE_SHARES) --d 128 --k 1024 --iters 3 \
	  --store $(GPU_RESULTS)/out-of-core/records.jsonl --out $(GPU_RESULTS)/out-of-core/table.md

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache kmbench/estimator/_inproc_*.so
