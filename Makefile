# Two commands for users: `make run` and `make test`. Both create .venv if it is absent.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch==2.13.0 first: on these machines it is a local CPU wheel; a bare `torch` would pull a
# multi-GB CUDA build. The package itself only asks for torch>=2.4.
TORCH_PIN ?= torch==2.13.0

.PHONY: run test test-slow install install-plot install-test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q "$(TORCH_PIN)" || $(BIN)/python -m pip install -q "torch>=2.4"

install: $(BIN)/python
	$(BIN)/python -m pip install -q -e .

# the demo saves its figures with matplotlib (the plot extra)
install-plot: $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[plot]"

install-test: $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test]"

run: install-plot
	$(BIN)/tql demo

test: install-test
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow" tests

test-slow: install-test
	$(BIN)/python -m pytest -q -p no:cacheprovider -m slow tests

bench: install-test
	$(BIN)/python benchmarks/kernels.py

clean:
	rm -rf $(VENV) build *.egg-info
