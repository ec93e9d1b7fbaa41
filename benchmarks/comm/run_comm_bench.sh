#!/usr/bin/env bash
# In one run, on this machine: memcpy bandwidth (the physical reference), then REPEATS interleaved
# rounds of
#   dlaunch --nproc 4 preflight --backend gloo --ops allreduce ...   (dlaunch's gloo communicator)
#   torchrun --nproc_per_node 4 torch_allreduce.py ...               (torch.distributed, gloo)
# over the same sizes, and a markdown summary of the medians in $OUT/summary.md.
#
# usage: benchmarks/comm/run_comm_bench.sh BUILD_DIR [OUT_DIR]
# env:   NPROC (4), MINBYTES (1K), MAXBYTES (64M), STEP (4), WARMUP (5), ITERS (20), REPEATS (3)
#        PYTHON (/usr/bin/python3), TORCHRUN (torchrun next to PYTHON or on PATH)
#        DLAUNCH_MODE: launcher (dlaunch starting four dlaunch-worker rank processes) or inproc
#        (ranks as threads in benchmarks/comm/comm_preflight_inproc); default: launcher if built.
#        DLAUNCH, WORKER: the binaries (default BUILD_DIR/launcher/dlaunch, BUILD_DIR/worker/...).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$(cd "${1:?usage: $0 BUILD_DIR [OUT_DIR]}" && pwd)"
OUT="${2:-$(mktemp -d /tmp/dlaunch-comm-bench.XXXXXX)}"
mkdir -p "$OUT"
NPROC="${NPROC:-4}" MINBYTES="${MINBYTES:-1K}" MAXBYTES="${MAXBYTES:-64M}" STEP="${STEP:-4}"
WARMUP="${WARMUP:-5}" ITERS="${ITERS:-20}" REPEATS="${REPEATS:-3}"
PYTHON="${PYTHON:-/usr/bin/python3}"
TORCHRUN="${TORCHRUN:-$(command -v torchrun || echo "$(dirname "$PYTHON")/torchrun")}"
DLAUNCH="${DLAUNCH:-$BUILD/launcher/dlaunch}"
WORKER="${WORKER:-$BUILD/worker/dlaunch-worker}"
INPROC="$BUILD/benchmarks/comm/comm_preflight_inproc"
if [[ -z "${DLAUNCH_MODE:-}" ]]; then
  if [[ -x "$DLAUNCH" && -x "$WORKER" ]]; then DLAUNCH_MODE=launcher; else DLAUNCH_MODE=inproc; fi
fi
SWEEP=(-b "$MINBYTES" -e "$MAXBYTES" -f "$STEP" -w "$WARMUP" -n "$ITERS")
PREFLIGHT=(preflight --backend gloo --ops allreduce "${SWEEP[@]}" --no-hang-test --no-p2p
  --collective-timeout 120)

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -srm); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "torch: $("$PYTHON" -c 'import torch; print(torch.__version__)')"
  echo "dlaunch mode: $DLAUNCH_MODE"
} | tee "$OUT/machine.txt"

echo "== memcpy" | tee -a "$OUT/commands.txt"
echo "$BUILD/benchmarks/comm/comm_memcpy_bandwidth 64 20" >> "$OUT/commands.txt"
"$BUILD/benchmarks/comm/comm_memcpy_bandwidth" 64 20 | tee "$OUT/memcpy.json"

for i in $(seq 1 "$REPEATS"); do
  echo "== round $i: dlaunch" | tee -a "$OUT/commands.txt"
  if [[ "$DLAUNCH_MODE" == launcher ]]; then
    # The worker as the ranks' program: the same processes `dlaunch preflight` starts.
    cmd=("$DLAUNCH" --nproc "$NPROC" --skip-doctor --quiet --log-dir "$OUT/dlaunch-logs"
      --run-id "round$i" -- "$WORKER" "${PREFLIGHT[@]}")
    echo "${cmd[*]}" >> "$OUT/commands.txt"
    "${cmd[@]}" > "$OUT/dlaunch-$i.txt" 2>&1
    cp "$OUT/dlaunch-logs/round$i/preflight.json" "$OUT/dlaunch-$i.json"
  else
    cmd=("$INPROC" "$NPROC" "$OUT/inproc-$i" "${PREFLIGHT[@]:1}")
    echo "${cmd[*]}" >> "$OUT/commands.txt"
    "${cmd[@]}" > "$OUT/dlaunch-$i.txt" 2>&1
    cp "$OUT/inproc-$i/preflight.json" "$OUT/dlaunch-$i.json"
  fi

  echo "== round $i: torch" | tee -a "$OUT/commands.txt"
  cmd=("$TORCHRUN" --nproc_per_node "$NPROC" --redirects 1 --tee 1 --log_dir "$OUT/torchrun-$i"
    "$HERE/torch_allreduce.py" "${SWEEP[@]}" --out "$OUT/torch-$i.json")
  echo "OMP_NUM_THREADS=1 ${cmd[*]}" >> "$OUT/commands.txt"
  OMP_NUM_THREADS=1 "${cmd[@]}" > "$OUT/torch-$i.txt" 2>&1
done

"$PYTHON" "$HERE/compare.py" "$OUT" | tee "$OUT/summary.md"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
