# The README's two commands: `make demo` and `make test`. Both set up .venv idempotently first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint typecheck bench-gauge clean llama-server chromium postgres

install: $(STAMP)

# Reinstalled only when the project's dependencies change.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0  # the CPU wheel, before botorch wants one
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tunegate demo --out-dir demo-out

test: $(STAMP) llama-server chromium postgres
	$(BIN)/python -m pytest -q
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# llama.cpp's llama-server for the integration tests: built once (~10 min on 2 cores) into
# ${TUNEGATE_CACHE:-~/.cache/tunegate}/llama.cpp/<version>/, reused afterwards (< 1 s).
llama-server: $(STAMP)
	bash scripts/build_llama_server.sh

# A headless Chromium for the HTML report tests: Debian's package, installed once as root.
chromium:
	bash scripts/install_chromium.sh

# A PostgreSQL server for the shared-study and lease tests: Debian's package, installed once as
# root; each test session makes a throwaway cluster of its own in a temporary directory.
postgres:
	bash scripts/install_postgres.sh

bench-gauge: $(STAMP)
	$(BIN)/python benchmarks/gauge_accuracy.py

clean:
	rm -rf $(VENV) demo-out .pytest_cache .mypy_cache .ruff_cache
