# Two entry points (see README): `make demo` runs the main job (reproduces the
# CUBIC paper's Fig. 8 in quick mode, with figures and a report), `make test` runs
# every test. Both set up what they need first: a virtualenv in .venv with the
# Python dependencies and the Rust engine built in release mode.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Short tier by default; `make test SLOW=full` runs the long end-to-end checks fully.
SLOW   ?= short

.PHONY: setup demo test test-rust test-python bench clean

setup: $(VENV)/.deps
	@VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/maturin develop --release --quiet --extras test >/dev/null

$(VENV)/.deps: pyproject.toml
	@command -v cargo >/dev/null || { echo "cargo not found: install a Rust toolchain (rustup) first"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "maturin>=1.5,<2" numpy "pandas>=2" "pyarrow>=14" "typer>=0.12" "rich>=13" "duckdb>=1.0" "matplotlib>=3.7" "dask[distributed]>=2024.1" "pytest>=8" "pytest-timeout>=2"
	@touch $@

demo: setup
	$(BIN)/ccarena reproduce cubic-fig8-intra-fairness

test: setup test-rust test-python

test-rust:
	cargo test --release --workspace --quiet

test-python: setup
	CCARENA_SLOW=$(SLOW) $(BIN)/pytest -q

bench: setup
	$(BIN)/ccarena bench

clean:
	rm -rf $(VENV) target results
