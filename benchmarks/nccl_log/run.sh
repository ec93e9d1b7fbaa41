#!/usr/bin/env bash
# Parse rate of the NCCL log reader: generates a 100 MB interleaved log (512 ranks) once, then
# 5 repetitions of each benchmark, one benchmark process at a time on the shared machine.
# usage: benchmarks/nccl_log/run.sh [BUILD_DIR]
set -euo pipefail
build=$(realpath "${1:-build}")
export NCCL_LOG_BENCH_FILE=${NCCL_LOG_BENCH_FILE:-$(mktemp -d)/nccl-100m.log}
flock /tmp/dlaunch-bench.lock "$build/benchmarks/nccl_log/nccl_log_parse_rate" \
  --benchmark_repetitions=5 --benchmark_report_aggregates_only=false \
  --benchmark_min_time=2
rm -f "$NCCL_LOG_BENCH_FILE"
