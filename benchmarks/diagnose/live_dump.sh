#!/bin/sh
# `dlaunch dump` of a running built-in train job of N ranks (default 16): the dump's wall time,
# and the job's step time (the progress line's "slowest rank ... ms/step") before and after it.
# Usage: benchmarks/diagnose/live_dump.sh BUILD_DIR [NPROC] [DUMPS]
set -eu
build=${1:?build dir}; nproc=${2:-16}; dumps=${3:-5}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$build/launcher/dlaunch" --nproc "$nproc" --log-dir "$tmp" --run-id run --hang-timeout 120 \
  train --data synthetic --model mlp --no-preflight --steps 100000 > "$tmp/out" 2>&1 &
job=$!
until grep -q "ms/step" "$tmp/out" 2>/dev/null; do sleep 1; done
sleep 20
steps() { grep -o "([0-9.]* ms/step)" "$tmp/out" | tr -d '(' | awk '{print $1}'; }
before=$(steps | wc -l)
for i in $(seq "$dumps"); do
  s=$(date +%s%N); "$build/launcher/dlaunch" dump "$tmp/run" > /dev/null 2>&1; e=$(date +%s%N)
  echo "dump $i: $(( (e - s) / 1000000 )) ms"
  sleep 5
done
sleep 20
echo "step ms before, last 10 progress lines sorted: $(steps | head -n "$before" | tail -10 | sort -n | tr '\n' ' ')"
echo "step ms after,  last 10 progress lines sorted: $(steps | tail -10 | sort -n | tr '\n' ' ')"
kill -INT $job; wait $job || true
