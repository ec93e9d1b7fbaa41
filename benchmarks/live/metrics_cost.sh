#!/bin/sh
# What serving /metrics costs a training job: interleaved pairs of the same built-in `train` job
# (synthetic MLP, NPROC ranks, STEPS steps), one with `--metrics-port 0` scraped every second by
# curl and one without a metrics server. Prints each run's median of the progress lines'
# slowest-rank ms/step, wall time and the launcher's own CPU time (utime + stime of the dlaunch
# process, its ranks not included, read from /proc every second until it exits), then the medians
# of the per-pair ratios (on/off) and of the launcher's extra CPU per scrape.
# Usage: benchmarks/live/metrics_cost.sh BUILD_DIR [NPROC] [STEPS] [PAIRS]
set -eu
build=${1:?build dir}; nproc=${2:-4}; steps=${3:-3000}; pairs=${4:-5}
dlaunch="$build/launcher/dlaunch"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# The launcher's own CPU time in clock ticks (utime + stime), or nothing once it has gone.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null; }

# run NAME [EXTRA...]: one job; prints "median_ms wall_ms scrapes launcher_cpu_ms".
run() {
  name=$1; shift
  out="$tmp/$name.out"
  s=$(date +%s%N)
  "$dlaunch" --nproc "$nproc" --log-dir "$tmp/logs" --run-id "$name" "$@" \
    train --data synthetic --model mlp --no-preflight --steps "$steps" > "$out" 2>&1 &
  job=$!
  scrapes=0; ticks=0; port=
  if [ $# -gt 0 ]; then
    until port=$(grep -o 'metrics on http://127.0.0.1:[0-9]*' "$out" | grep -o '[0-9]*$'); do
      sleep 0.05
    done
  fi
  while t=$(cpu_ticks "$job") && [ -n "$t" ]; do
    ticks=$t
    if [ -n "$port" ]; then
      curl -s -o /dev/null "http://127.0.0.1:$port/metrics" && scrapes=$((scrapes + 1))
    fi
    sleep 1
  done
  wait "$job"
  e=$(date +%s%N)
  ms=$(grep -o "([0-9.]* ms/step)" "$out" | tr -d '(' | awk '{print $1}' | median)
  echo "$ms $(( (e - s) / 1000000 )) $scrapes $(( ticks * 1000 / $(getconf CLK_TCK) ))"
}

: > "$tmp/ratios"
for i in $(seq "$pairs"); do
  # Alternate which goes first, so that a drift of the machine's load falls on both.
  if [ $((i % 2)) -eq 1 ]; then
    on=$(run "on$i" --metrics-port 0); off=$(run "off$i")
  else
    off=$(run "off$i"); on=$(run "on$i" --metrics-port 0)
  fi
  set -- $on; on_ms=$1; on_wall=$2; n=$3; on_cpu=$4
  set -- $off; off_ms=$1; off_wall=$2; off_cpu=$4
  ratio=$(awk -v a="$on_ms" -v b="$off_ms" 'BEGIN {printf "%.4f", a / b}')
  wratio=$(awk -v a="$on_wall" -v b="$off_wall" 'BEGIN {printf "%.4f", a / b}')
  # The launcher's CPU per wall second, on and off, and the difference per scrape.
  per_s_on=$(awk -v c="$on_cpu" -v w="$on_wall" 'BEGIN {printf "%.1f", c * 1000 / w}')
  per_s_off=$(awk -v c="$off_cpu" -v w="$off_wall" 'BEGIN {printf "%.1f", c * 1000 / w}')
  per_scrape=$(awk -v a="$per_s_on" -v b="$per_s_off" 'BEGIN {printf "%.2f", a - b}')
  echo "pair $i: metrics on ${on_ms} ms/step ${on_wall} ms wall ($n scrapes, launcher CPU ${per_s_on} ms/s); off ${off_ms} ms/step ${off_wall} ms wall (launcher CPU ${per_s_off} ms/s); step ratio $ratio, wall ratio $wratio, extra launcher CPU ${per_scrape} ms per 1 s scrape"
  echo "$ratio $wratio $per_scrape" >> "$tmp/ratios"
done
echo "median step-time ratio (on/off): $(cut -d' ' -f1 "$tmp/ratios" | median), range $(cut -d' ' -f1 "$tmp/ratios" | sort -n | head -1)-$(cut -d' ' -f1 "$tmp/ratios" | sort -n | tail -1)"
echo "median wall ratio (on/off): $(cut -d' ' -f2 "$tmp/ratios" | median), range $(cut -d' ' -f2 "$tmp/ratios" | sort -n | head -1)-$(cut -d' ' -f2 "$tmp/ratios" | sort -n | tail -1)"
echo "median extra launcher CPU per scrape (ms): $(cut -d' ' -f3 "$tmp/ratios" | median), range $(cut -d' ' -f3 "$tmp/ratios" | sort -n | head -1)-$(cut -d' ' -f3 "$tmp/ratios" | sort -n | tail -1)"
