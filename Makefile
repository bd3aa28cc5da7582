# mlenergy: the README's two commands, plus lint. Everything installs into .venv.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TORCH  ?= torch==2.13.0
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_DISABLE_TELEMETRY ?= 1

.PHONY: demo test test-fast lint format install install-dev browser-deps clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first (local CPU wheel; a bare `torch` requirement would pull a multi-GB CUDA build).
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e .
	$(BIN)/pip install -q -e '.[notebook,serve]'
	@$(MAKE) --no-print-directory fix-amdsmi
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[dev,ray]'
	@$(MAKE) --no-print-directory fix-amdsmi
	@touch $@

# zeus pulls in amdsmi, whose import raises KeyError (not ImportError) on machines without the
# AMD SMI library; ray then fails to import beside it. Keep amdsmi only where it actually loads.
.PHONY: fix-amdsmi
fix-amdsmi:
	@$(BIN)/python -c "import amdsmi" >/dev/null 2>&1 || \
		{ $(BIN)/pip uninstall -q -y amdsmi >/dev/null 2>&1 && \
		  echo "note: removed amdsmi (no AMD SMI library on this machine; AMD GPUs are not monitored)"; } || true

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed
	$(BIN)/mlenergy demo

# Tests run in TEST_WORKERS processes (pytest-xdist; 0: one process). A module's tests share a
# worker, and so do the tests of one shared server (tests/conftest.py); the slowest tests are
# listed at the end.
TEST_WORKERS ?= 2
# The suite starts many Python processes (commands, servers, kernels, Ray workers): they
# keep compiled bytecode even where the environment sets PYTHONDONTWRITEBYTECODE.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n $(TEST_WORKERS) \
	--dist loadfile --no-loadscope-reorder

test: $(VENV)/.installed-dev
	$(PYTEST) --durations=25

# The inner loop: everything but the tests marked slow (> ~1 s each) and the browser tests.
test-fast: $(VENV)/.installed-dev
	$(PYTEST) --durations=10 -m "not slow and not browser"

# JupyterLab on the notebooks (installed by the notebook extra of `make install`/`make demo`).
.PHONY: lab
lab: $(VENV)/.installed
	$(BIN)/jupyter lab notebooks/

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check mlenergy leaderboard tests benchmarks
	$(BIN)/ruff format --check mlenergy leaderboard tests benchmarks
	$(BIN)/mypy mlenergy

format: $(VENV)/.installed-dev
	$(BIN)/ruff format mlenergy leaderboard tests benchmarks
	$(BIN)/ruff check --fix mlenergy leaderboard tests benchmarks

# Browser tests need Debian's chromium (never `playwright install`: it downloads a browser).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium; }

clean:
	rm -rf $(VENV) .pytest_cache reports
