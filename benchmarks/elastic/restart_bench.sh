#!/bin/bash
# Time from a rank failure on node 1 to the restarted job's first step, two nodes (two
# launchers) on loopback, NPROC ranks each (default 1): dlaunch against torchrun --rdzv-backend c10d.
#   benchmarks/elastic/restart_bench.sh DLAUNCH_BIN REPEATS [torchrun_monitor_interval...]
#   PY=.venv-peers/bin/python NPROC=2 benchmarks/elastic/restart_bench.sh ...   # torchrun 2.15, 4 ranks
# (Debian's torchrun 1.13 crashes with its default --redirects 0 on this Python: --redirects 1.)
# Prints one line per run: tool, failure -> restarted ranks started, failure -> first step (s);
# then each tool's medians (min-max) and their ratios to dlaunch's.
set -u
DLAUNCH=${1:?dlaunch binary}; REPEATS=${2:-5}; shift 2
INTERVALS=("${@:-5}")
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PY:-/usr/bin/python3}  # PY=.venv-torch2/bin/python: torchrun 2.x
NPROC=${NPROC:-1}  # TR_TIMEOUT: seconds a torchrun run may take (180)
RESULTS=$(mktemp)
export DLAUNCH_JOB_TOKEN=restart-bench-token-0123456789

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

measure() {  # tool out
  $PY - "$2" "$1" <<'PYEOF'
import glob, os, sys
out, tool = sys.argv[1], sys.argv[2]
read = lambda p: float(open(p).read())
try:
    fail = read(os.path.join(out, "fail"))
    start = max(read(p) for p in glob.glob(os.path.join(out, "start*")))
    step = max(read(p) for p in glob.glob(os.path.join(out, "step*")))
    print("%-12s started %.3f s  first step %.3f s" % (tool, start - fail, step - fail), flush=True)
except (OSError, ValueError):
    print("%-12s no result (see %s)" % (tool, out))
PYEOF
}

run_dlaunch() {
  local out; out=$(mktemp -d); local port; port=$(free_port)
  for n in 0 1; do
    timeout 120 "$DLAUNCH" --nnodes 2 --rdzv-endpoint 127.0.0.1:$port --nproc $NPROC --max-restarts 1 \
      --log-dir "$out/logs$n" --run-id bench --python $PY --env BENCH_OUT="$out" -q \
      "$HERE/step.py" >/dev/null 2>"$out/err$n" &
    sleep 0.2
  done
  wait
  measure dlaunch "$out"
}

run_torchrun() {  # monitor_interval
  local out; out=$(mktemp -d); local port; port=$(free_port)
  for n in 0 1; do
    BENCH_OUT="$out" timeout "${TR_TIMEOUT:-180}" $PY -m torch.distributed.run --nnodes 2 --nproc_per_node $NPROC \
      --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:$port --rdzv_id bench --max_restarts 1 \
      --monitor_interval "$1" --redirects 1 --tee 1 --log_dir "$out/tlogs$n" \
      "$HERE/step.py" >/dev/null 2>"$out/err$n" &
    sleep 0.2
  done
  wait
  measure "torchrun/$1" "$out"
}

for ((i = 0; i < REPEATS; i++)); do
  run_dlaunch
  for m in "${INTERVALS[@]}"; do run_torchrun "$m"; done
done | tee "$RESULTS"
$PY - "$RESULTS" "$((2 * NPROC))" <<'PYEOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 8 and f[1] == "started":
        runs.setdefault(f[0], []).append((float(f[2]), float(f[6])))
def med(tool, k):
    return statistics.median(r[k] for r in runs[tool])
print("| launcher, 2 nodes x %d ranks | runs | failure -> restarted ranks started, s | / dlaunch "
      "| failure -> first step, s | / dlaunch |" % (int(sys.argv[2]) // 2))
print("| --- | --- | --- | --- | --- | --- |")
for tool, rs in runs.items():
    cells = []
    for k in (0, 1):
        v = [r[k] for r in rs]
        cells.append("%.3f (%.3f-%.3f)" % (statistics.median(v), min(v), max(v)))
        ok = tool != "dlaunch" and "dlaunch" in runs
        cells.append("%.1fx" % (med(tool, k) / med("dlaunch", k)) if ok else "")
    print("| %s | %d | %s |" % (tool, len(rs), " | ".join(cells)))
PYEOF
rm -f "$RESULTS"
