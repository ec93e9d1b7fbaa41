#!/usr/bin/env bash
# Detection latency of the hang monitor, 20 runs per injected fault, with real processes.
# Usage: benchmarks/diagnose/run_latency.sh [build-dir] [extra diagnose_latency flags...]
# Writes the table to stdout and the numbers to <build-dir>/diagnose-latency.json.
set -euo pipefail
build=${1:-build}
shift || true
cmake --build "$build" --target diagnose_latency -j2
exec "$build/benchmarks/diagnose/diagnose_latency" --runs 20 --ranks 4 --hang-timeout-ms 2000 \
  --heartbeat-timeout-ms 1000 --out "$build/diagnose-latency.json" "$@"
