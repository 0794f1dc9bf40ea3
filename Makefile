# Two entry points (see README): `make demo` runs the main job (reproduces the
# CUBIC paper's Fig. 8 in quick mode, with figures and a report), `make test` runs
# every test. Both set up what they need first: a virtualenv in .venv with the
# Python dependencies and the Rust engine built in release mode.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Short tier by default; `make test SLOW=full` runs the long end-to-end checks fully.
SLOW   ?= short

.PHONY: setup demo test test-rust test-python bench clean linux-tools

# Cargo's progress lines show while the engine builds (about a minute the first time).
setup: $(VENV)/.deps linux-tools
	@echo "== building the engine (Rust, release mode; cargo shows its progress)"
	@VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/maturin develop --release --extras test,dask
	@echo "== ready: $(BIN)/ccarena"

# The linux backend's helpers (docs/linux-backend.md): the NFQUEUE delay
# program and the BPF congestion-control programs, built into the package's
# linux/bin directory. Built when their tools are present (gcc with
# libnetfilter-queue-dev; clang, bpftool and libbpf-dev with a kernel that has
# BTF); otherwise skipped with a note, and the simulator works as before.
# LINUX_BIN=DIR builds them elsewhere, e.g. into an installed package's linux/bin.
LINUX_BIN ?= python/ccarena/backends/linux/bin
BPF_SRC   := $(wildcard bpf/*.bpf.c)
BPF_OBJ   := $(patsubst bpf/%.bpf.c,$(LINUX_BIN)/%.bpf.o,$(BPF_SRC))
BPF_ARCH  := $(shell uname -m | sed -e s/x86_64/x86/ -e s/aarch64/arm64/)

linux-tools:
	@mkdir -p $(LINUX_BIN)
	@cp linux/delay.c $(LINUX_BIN)/delay.c  # the testbed backend copies it to hosts without netem and builds it there
	@if command -v gcc >/dev/null && pkg-config --exists libnetfilter_queue 2>/dev/null; then \
		$(MAKE) --no-print-directory $(LINUX_BIN)/ccarena-delay; \
	else echo "note: gcc or libnetfilter-queue-dev missing: the linux backend's delay program is not built"; fi
	@if command -v clang >/dev/null && command -v bpftool >/dev/null && [ -r /sys/kernel/btf/vmlinux ] && [ -r /usr/include/bpf/bpf_helpers.h ]; then \
		$(MAKE) --no-print-directory $(BPF_OBJ); \
	else echo "note: clang, bpftool, libbpf-dev or kernel BTF missing: the linux backend's BPF algorithms are not built"; fi

$(LINUX_BIN)/ccarena-delay: linux/delay.c
	gcc -O2 -Wall -Wextra -o $@ $< $$(pkg-config --cflags --libs libnetfilter_queue) -lm

target/bpf/vmlinux.h:
	@mkdir -p target/bpf
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(LINUX_BIN)/%.bpf.o: bpf/%.bpf.c bpf/ccarena_ca.h target/bpf/vmlinux.h
	clang -O2 -g -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -Itarget/bpf -c $< -o $@

$(VENV)/.deps: pyproject.toml
	@command -v cargo >/dev/null || { echo "cargo not found: install a Rust toolchain (rustup) first"; exit 2; }
	@echo "== creating the virtualenv $(VENV) (needs python3-venv)"
	@$(PYTHON) -m venv $(VENV) || { echo "could not create $(VENV): on Debian/Ubuntu install python3-venv"; exit 2; }
	@echo "== installing the Python dependencies (pip; about 300 MB)"
	@$(BIN)/pip install --quiet --upgrade pip
	@$(BIN)/pip install --progress-bar on "maturin>=1.5,<2" numpy "pandas>=2" "pyarrow>=14" "typer>=0.12" "rich>=13" "duckdb>=1.0" "matplotlib>=3.7" "dask[distributed]>=2024.1" "scipy>=1.10" "asyncssh>=2.14" "pytest>=8" "pytest-timeout>=2" "hypothesis>=6"
	@touch $@

demo: setup
	$(BIN)/ccarena reproduce cubic-fig8-intra-fairness

test: setup test-rust test-python

# The property tests draw from a fixed seed here, as hypothesis does
# (derandomize), so that CI is repeatable; PROPTEST_RNG_SEED=<n> picks another.
# A hung test fails the target instead of stalling it.
test-rust:
	PROPTEST_RNG_SEED=$${PROPTEST_RNG_SEED:-20261124} timeout 40m cargo test --release --workspace --quiet

test-python: setup
	CCARENA_SLOW=$(SLOW) $(BIN)/pytest -q

bench: setup
	$(BIN)/ccarena bench

clean:
	rm -rf $(VENV) target results
