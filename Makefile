# Two entry points on a fresh machine (Python >= 3.11, a C++ compiler, no GPU needed):
#   make demo   set up, then predict the built-in GPT training step on an H100
#   make test   set up, then run the CPU test suite (what CI runs, via .ci/run)
PYTHON ?= python3
VENV ?= .venv
# The CPU wheel of torch: small, and all kernelcast needs without a GPU.
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin

.PHONY: setup demo test clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[test]'
	touch $@

demo: setup
	$(BIN)/kernelcast predict example:gpt --gpu h100 --json demo-prediction.json

test: setup
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache demo-prediction.json
