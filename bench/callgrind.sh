#!/usr/bin/env bash
# Counts the instructions the engine executes on a scenario (default: the bench
# preset). Instruction counts are repeatable whatever else the machine is doing,
# unlike wall time, so this is the number to compare before/after a change.
# Usage: bench/callgrind.sh [preset-or-file]   (after `make setup`)
set -euo pipefail
cd "$(dirname "$0")/.."
scenario="${1:-bench}"
cargo build --release --quiet -p ccarena-sim --example run_config
cfg=$(mktemp)
.venv/bin/python -c "import sys; from ccarena import load_scenario; print(load_scenario(sys.argv[1]).engine_json())" "$scenario" > "$cfg"
out=$(mktemp)
valgrind --tool=callgrind --callgrind-out-file="$out" ./target/release/examples/run_config < "$cfg" 2>&1 | grep -E "Collected|simulated"
callgrind_annotate "$out" 2>/dev/null | grep -E "^ *[0-9,]+ .*(PROGRAM TOTALS|ccarena_sim|alloc::)" | head -15
rm -f "$cfg" "$out"
