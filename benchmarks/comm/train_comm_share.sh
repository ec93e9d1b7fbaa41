#!/usr/bin/env bash
# The share of a `dlaunch --nproc 4 train` step spent waiting on communication, with the CPU
# communicator on shared memory and on TCP: REPEATS rounds, each running both (order rotated),
# and per transport the median over rounds of the ranks' mean comm share, step time (p50) and
# samples/s, from each rank's final telemetry line in rank<R>/events.jsonl.
#
# usage: benchmarks/comm/train_comm_share.sh BUILD_DIR [OUT_DIR]
# env:   NPROC (4), STEPS (300), REPEATS (3), TRAIN_ARGS (extra train options),
#        DLAUNCH (BUILD_DIR/launcher/dlaunch, with dlaunch-worker next to it)
# Run it alone: flock /tmp/dlaunch-bench.lock benchmarks/comm/train_comm_share.sh build /tmp/tcs
set -euo pipefail
BUILD="$(cd "${1:?usage: $0 BUILD_DIR [OUT_DIR]}" && pwd)"
OUT="${2:-$(mktemp -d /tmp/dlaunch-train-comm.XXXXXX)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
NPROC="${NPROC:-4}" STEPS="${STEPS:-300}" REPEATS="${REPEATS:-3}"
DLAUNCH="${DLAUNCH:-$BUILD/launcher/dlaunch}"
read -r -a EXTRA <<< "${TRAIN_ARGS:-}"
TRANSPORTS=(shm tcp)
echo "date: $(date -u +%FT%TZ); load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/machine.txt"
: > "$OUT/commands.txt"
for i in $(seq 1 "$REPEATS"); do
  for k in 0 1; do
    t="${TRANSPORTS[$(((k + i - 1) % 2))]}"
    cmd=("$DLAUNCH" --nproc "$NPROC" --skip-doctor --log-dir "$OUT/logs"
      --run-id "$t-$i" train --steps "$STEPS" --no-preflight --transport "$t" "${EXTRA[@]}")
    echo "== round $i: $t" | tee -a "$OUT/commands.txt"
    echo "${cmd[*]}" >> "$OUT/commands.txt"
    "${cmd[@]}" > "$OUT/$t-$i.txt" 2>&1
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"

/usr/bin/python3 - "$OUT" "$NPROC" <<'EOF' | tee "$OUT/summary.md"
import glob, json, os, statistics, sys
out, nproc = sys.argv[1], int(sys.argv[2])

def final(run):
    """Per rank, the last telemetry line that carries the whole-run figures."""
    ranks = []
    for r in range(nproc):
        last = None
        with open(os.path.join(run, f"rank{r}", "events.jsonl")) as f:
            for line in f:
                e = json.loads(line)
                if "comm_share" in e:
                    last = e
        ranks.append(last)
    return ranks

print("| transport | comm share (median, min-max over rounds) | step ms p50 | samples/s (all ranks) |")
print("| --- | ---: | ---: | ---: |")
for t in ("shm", "tcp"):
    share, step, sps = [], [], []
    for run in sorted(glob.glob(os.path.join(out, "logs", f"{t}-*"))):
        ranks = final(run)
        share.append(100 * statistics.mean(e["comm_share"] for e in ranks))
        step.append(statistics.mean(e["step_ms_median"] for e in ranks))
        sps.append(sum(e["run_samples_per_sec"] for e in ranks))
    cell = lambda v, f: f"{f.format(statistics.median(v))} ({f.format(min(v))}-{f.format(max(v))})"
    print(f"| {t} | {cell(share, '{:.1f}%')} | {cell(step, '{:.2f}')} | {cell(sps, '{:.0f}')} |")
EOF
