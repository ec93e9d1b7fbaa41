#!/usr/bin/env bash
# Side by side in one run, on this machine, 4 ranks, float32 sum allreduce over the same sizes:
#   shm    dlaunch --nproc 4 ... preflight --backend gloo --transport shm  (shared memory)
#   tcp    dlaunch --nproc 4 ... preflight --backend gloo --transport tcp  (gloo over loopback)
#   mpi    mpirun --oversubscribe -np 4 mpi_allreduce                      (OpenMPI MPI_Allreduce)
#   torch  python3 -m torch.distributed.run --nproc_per_node 4 torch_allreduce.py  (gloo)
# REPEATS rounds, each running every system once, the order rotated from round to round, with the
# memcpy bandwidth (the physical limit) measured before the first round and after the last.
# compare.py writes the medians and spreads to $OUT/summary.md.
#
# usage: benchmarks/comm/run_comm_bench.sh BUILD_DIR [OUT_DIR]
# env:   NPROC (4), MINBYTES (1K), MAXBYTES (64M), STEP (4), WARMUP (5), ITERS (20), REPEATS (3),
#        SYSTEMS ("shm tcp mpi torch"), PYTHON (/usr/bin/python3), MPICC (mpicc), MPIRUN (mpirun)
#        DLAUNCH_MODE: launcher (dlaunch starting four dlaunch-worker rank processes) or inproc
#        (ranks as threads in benchmarks/comm/comm_preflight_inproc); default: launcher if built.
#        DLAUNCH, WORKER: the binaries (default BUILD_DIR/launcher/dlaunch, BUILD_DIR/worker/...).
# Run it alone: flock /tmp/dlaunch-bench.lock benchmarks/comm/run_comm_bench.sh build /tmp/bench
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$(cd "${1:?usage: $0 BUILD_DIR [OUT_DIR]}" && pwd)"
OUT="${2:-$(mktemp -d /tmp/dlaunch-comm-bench.XXXXXX)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
NPROC="${NPROC:-4}" MINBYTES="${MINBYTES:-1K}" MAXBYTES="${MAXBYTES:-64M}" STEP="${STEP:-4}"
WARMUP="${WARMUP:-5}" ITERS="${ITERS:-20}" REPEATS="${REPEATS:-3}"
read -r -a SYSTEMS <<< "${SYSTEMS:-shm tcp mpi torch}"
PYTHON="${PYTHON:-/usr/bin/python3}"
MPICC="${MPICC:-mpicc}" MPIRUN="${MPIRUN:-mpirun}"
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
  echo "mpi: $("$MPIRUN" --version 2>&1 | head -1)"
  echo "dlaunch mode: $DLAUNCH_MODE; systems: ${SYSTEMS[*]}; repeats: $REPEATS"
} | tee "$OUT/machine.txt"
: > "$OUT/commands.txt"

log() { echo "$*" >> "$OUT/commands.txt"; }

memcpy() {
  echo "== memcpy ($1)" | tee -a "$OUT/commands.txt"
  log "$BUILD/benchmarks/comm/comm_memcpy_bandwidth 64 20"
  "$BUILD/benchmarks/comm/comm_memcpy_bandwidth" 64 20 | tee "$OUT/memcpy-$1.json"
}

run_dlaunch() {  # transport round
  local cmd
  if [[ "$DLAUNCH_MODE" == launcher ]]; then
    # The worker as the ranks' program: the same processes `dlaunch preflight` starts.
    cmd=("$DLAUNCH" --nproc "$NPROC" --skip-doctor --quiet --log-dir "$OUT/dlaunch-logs"
      --run-id "$1-$2" -- "$WORKER" "${PREFLIGHT[@]}" --transport "$1")
    log "${cmd[*]}"
    "${cmd[@]}" > "$OUT/$1-$2.txt" 2>&1
    cp "$OUT/dlaunch-logs/$1-$2/preflight.json" "$OUT/$1-$2.json"
  else
    cmd=("$INPROC" "$NPROC" "$OUT/inproc-$1-$2" "${PREFLIGHT[@]:1}" --transport "$1")
    log "${cmd[*]}"
    "${cmd[@]}" > "$OUT/$1-$2.txt" 2>&1
    cp "$OUT/inproc-$1-$2/preflight.json" "$OUT/$1-$2.json"
  fi
}

run_mpi() {  # round
  # Without --oversubscribe OpenMPI busy-polls, which on a host with fewer cores than ranks
  # takes 100-400 ms per op.
  local cmd=("$MPIRUN" --allow-run-as-root --oversubscribe -np "$NPROC" "$OUT/mpi_allreduce"
    "${SWEEP[@]}" --out "$OUT/mpi-$1.json")
  log "${cmd[*]}"
  "${cmd[@]}" > "$OUT/mpi-$1.txt" 2>&1
}

run_torch() {  # round
  local cmd=("$PYTHON" -m torch.distributed.run --nproc_per_node "$NPROC" --redirects 1 --tee 1
    --log_dir "$OUT/torchrun-$1" "$HERE/torch_allreduce.py" "${SWEEP[@]}"
    --out "$OUT/torch-$1.json")
  log "OMP_NUM_THREADS=1 ${cmd[*]}"
  OMP_NUM_THREADS=1 "${cmd[@]}" > "$OUT/torch-$1.txt" 2>&1
}

if [[ " ${SYSTEMS[*]} " == *" mpi "* ]]; then
  log "$MPICC -O2 -o $OUT/mpi_allreduce $HERE/mpi_allreduce.c"
  "$MPICC" -O2 -o "$OUT/mpi_allreduce" "$HERE/mpi_allreduce.c"
fi

memcpy before
n=${#SYSTEMS[@]}
for i in $(seq 1 "$REPEATS"); do
  for k in $(seq 0 $((n - 1))); do
    sys="${SYSTEMS[$(((k + i - 1) % n))]}"
    echo "== round $i: $sys" | tee -a "$OUT/commands.txt"
    case "$sys" in
      shm | tcp) run_dlaunch "$sys" "$i" ;;
      mpi) run_mpi "$i" ;;
      torch) run_torch "$i" ;;
      *) echo "unknown system $sys" >&2; exit 2 ;;
    esac
  done
done
memcpy after

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
"$PYTHON" "$HERE/compare.py" "$OUT" "${SYSTEMS[@]}" | tee "$OUT/summary.md"
