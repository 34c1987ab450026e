# Two entry points on a fresh machine (Python >= 3.11, a C++ compiler, no GPU needed):
#   make demo   set up, then predict the built-in GPT training step on an H100
#   make test   set up, then run the CPU test suite (what CI runs, via .ci/run)
#   make test-fast   the same suite without the tests marked slow (live model captures, CLI runs, compiles):
#                    under 2 minutes on two cores, for the edit-test loop; CI runs the full one
# and the second torch CI tests (.ci/run runs it after `make test`):
#   make test-cuda-build   the test suite under pip's CUDA build of torch 2.14.1 (no GPU), then the same
#                          predictions made under both builds compared (benchmarks/torch_builds_agree.py)
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
# PyTorch's index of CPU-only wheels (~200 MB). On Linux, PyPI's torch is the CUDA build (several GB of CUDA
# libraries kernelcast does not use: it never runs a kernel).
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
BIN := $(VENV)/bin
# The CUDA build a user gets from `pip install torch` on Linux, with torchvision beside it (several GB).
CUDA_VENV ?= .venv-cuda
CUDA_TORCH ?= torch==2.14.1 torchvision==0.29.1
CUDA_BIN := $(CUDA_VENV)/bin

.PHONY: setup demo test test-fast setup-cuda-build test-cuda-build clean

setup: $(VENV)/.installed

# Where torch comes from, first that works:
# 1. A CPU build of torch that $(PYTHON) already imports: the venv is made with --system-site-packages so it
#    sees that torch, and nothing is downloaded. A CUDA build is not reused: kernelcast's tested path on a
#    machine without a GPU is the CPU build (README, "Which torch"). (If $(PYTHON) is itself a venv's Python,
#    the new venv sees its base interpreter's packages, not that venv's; step 2 then finds no torch.)
# 2. Torch the venv already sees (from step 1, or a re-run after pyproject.toml changed).
# 3. PyTorch's CPU index, with a short timeout and no retries, so a machine that cannot reach it (CI, an
#    offline mirror) moves on in seconds.
# 4. The default index: whatever pip is configured with (on CI, a local wheel folder that holds the CPU build;
#    on a plain machine, PyPI, which on Linux means the large CUDA build).
$(VENV)/.installed: pyproject.toml
	@if $(PYTHON) -c "import sys, torch; sys.exit(torch.version.cuda is not None)" 2>/dev/null; then \
		$(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
		$(PYTHON) -m venv $(VENV); \
	fi
	$(BIN)/pip install -q --upgrade pip
	@if $(BIN)/python -c "import torch" 2>/dev/null; then \
		echo "make: $(VENV) already sees torch $$($(BIN)/python -c 'import torch; print(torch.__version__)')"; \
	elif echo "make: installing $(TORCH), CPU build, from $(TORCH_CPU_INDEX)" && \
		$(BIN)/pip install -q --timeout 10 --retries 0 --index-url $(TORCH_CPU_INDEX) $(TORCH); then :; \
	else \
		echo "make: that failed; installing $(TORCH) from pip's default index"; \
		$(BIN)/pip install -q $(TORCH); \
	fi
	$(BIN)/pip install -q -e '.[test]'
	touch $@

demo: setup
	$(BIN)/kernelcast predict example:gpt --gpu h100 --json demo-prediction.json
	@echo
	@echo "kernelcast is installed in $(VENV). To run it: source $(VENV)/bin/activate (then: kernelcast --help),"
	@echo "or call it directly: $(BIN)/kernelcast devices"

test: setup
	$(BIN)/python -m pytest -q

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

$(CUDA_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(CUDA_VENV)
	$(CUDA_BIN)/pip install -q --upgrade pip
	$(CUDA_BIN)/pip install -q $(CUDA_TORCH)
	$(CUDA_BIN)/pip install -q -e '.[test]'
	touch $@

setup-cuda-build: $(CUDA_VENV)/.installed

# The whole suite under the CUDA build, then the agreement of the two builds' predictions: GPU time within 1%,
# kernels and peak memory exactly (benchmarks/torch_builds_agree.py says which cases and why).
test-cuda-build: setup setup-cuda-build
	$(CUDA_BIN)/python -m pytest -q
	@mkdir -p build
	$(BIN)/python benchmarks/torch_builds_agree.py run --out build/agree-cpu-build.json
	$(CUDA_BIN)/python benchmarks/torch_builds_agree.py run --out build/agree-cuda-build.json
	$(BIN)/python benchmarks/torch_builds_agree.py compare build/agree-cpu-build.json build/agree-cuda-build.json

clean:
	rm -rf $(VENV) $(CUDA_VENV) build src/*.egg-info .pytest_cache demo-prediction.json
