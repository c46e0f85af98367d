# Two commands on a fresh machine (only Python 3.11+ and make needed):
#   make run    install toolkeeper and run the main job
#   make test   install the test tools and run lint, type checks and the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip -q --disable-pip-version-check
ARGS ?= examples/weather.py

.PHONY: run test lint typecheck pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(PIP) install -e .
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[dev]"
	touch $@ $(VENV)/.core

$(VENV)/.bench: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[dev,bench]"
	touch $@ $(VENV)/.dev $(VENV)/.core

run: $(VENV)/.core
	$(BIN)/toolkeeper check $(ARGS) --format all
	$(BIN)/toolkeeper schema $(ARGS) --format openai-chat

lint: $(VENV)/.dev
	$(BIN)/ruff check .

typecheck: $(VENV)/.dev
	$(BIN)/mypy

pytest: $(VENV)/.dev
	$(BIN)/python -m pytest

test: lint typecheck pytest

bench: $(VENV)/.bench
	$(BIN)/python benchmarks/bench_definitions.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
