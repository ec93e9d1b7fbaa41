#!/usr/bin/env bash
# Stop-to-exit and launcher-kill survivors, N runs each (default 10):
#  1. SIGTERM to dlaunch while one of 2 ranks is SIGSTOPped, --grace-period 30: seconds to exit.
#  2. SIGKILL to dlaunch, ranks `bash -c 'sleep 300 & setsid sleep 301 & exec sleep 302'`: processes
#     left 1 s later (cgroup path, then DLAUNCH_CGROUPS=off with the setsid child left out).
# Usage: benchmarks/durability/stop_to_exit.sh BUILD_DIR [N]
set -u
B=${1:?build dir}; N=${2:-10}
D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
wait_ready() { for _ in $(seq 200); do [ "$(grep -c ready "$1")" -ge 2 ] && return; sleep 0.05; done; }
for i in $(seq "$N"); do
  "$B/launcher/dlaunch" --log-dir "$D" --run-id s$i --nproc 2 --grace-period 30 -- \
    bash -c 'echo ready $$; exec sleep 300' > "$D/out" 2>&1 & P=$!
  wait_ready "$D/out"; kill -STOP "$(grep 'rank 1\] ready' "$D/out" | awk '{print $4}')"
  T0=$(date +%s.%N); kill -TERM $P; wait $P
  echo "stop_to_exit_s $(echo "$(date +%s.%N) - $T0" | bc)"
done
for mode in cgroup off; do
  for i in $(seq "$N"); do
    M="DUR_BENCH_MARK=$$-$mode-$i"; kids='sleep 300 & setsid sleep 301 &'
    [ $mode = off ] && kids='sleep 300 &'
    DLAUNCH_CGROUPS=$([ $mode = off ] && echo off || echo auto) "$B/launcher/dlaunch" --log-dir "$D" \
      --run-id k$mode$i --nproc 2 --env "$M" -- bash -c "$kids echo ready \$\$; exec sleep 302" \
      > "$D/out" 2>&1 & P=$!
    wait_ready "$D/out"; kill -KILL $P; wait $P 2>/dev/null; sleep 1
    echo "survivors_$mode $(grep -lsa "$M" /proc/[0-9]*/environ | wc -l)"
  done
done
