#!/usr/bin/env bash
# Launch-to-exit and failure-to-teardown time: dlaunch against Debian's torchrun, in one run.
# usage: benchmarks/launch/run.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-10}
dlaunch=$(realpath "$build/launcher/dlaunch")
torchrun=${TORCHRUN:-/usr/bin/torchrun}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

echo "## launch-to-exit (hyperfine, $runs runs, /bin/true as every rank)"
hyperfine -N --warmup 2 --runs "$runs" --export-json launch.json \
  -n "dlaunch --nproc 4" "$dlaunch --nproc 4 --log-dir $work/dl -- /bin/true" \
  -n "torchrun --nproc_per_node 4" "$torchrun --nproc_per_node 4 --redirects 1 --tee 1 --log_dir $work/tr --no_python /bin/true" \
  -n "dlaunch --nproc 8" "$dlaunch --nproc 8 --log-dir $work/dl -- /bin/true" \
  -n "torchrun --nproc_per_node 8" "$torchrun --nproc_per_node 8 --redirects 1 --tee 1 --log_dir $work/tr --no_python /bin/true" \
  >/dev/null
python3 - launch.json <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
print("| command | median ms | min ms | max ms | torchrun / dlaunch (median) |")
print("|---|---|---|---|---|")
for n in ("4", "8"):
    d, t = r["dlaunch --nproc " + n], r["torchrun --nproc_per_node " + n]
    for x in (d, t):
        ratio = f"{t['median'] / d['median']:.0f}x" if x is d else ""
        print(f"| {x['command']} | {x['median']*1e3:.1f} | {x['min']*1e3:.1f} | {x['max']*1e3:.1f} | {ratio} |")
PY

# Rank 1 exits 1 at once; the others sleep. Teardown time = launcher exit - rank 1's exit.
cat > rank.sh <<'SH'
#!/bin/sh
if [ "$RANK" = 1 ]; then date +%s%N > "$MARK"; exit 1; fi
exec sleep 600
SH
chmod +x rank.sh
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
teardown() {  # name, command...
  local name=$1; shift
  : > "$name.ms"
  for _ in $(seq "$runs"); do
    MARK=$work/mark "$@" >/dev/null 2>&1 || true
    end=$(date +%s%N)
    echo $(( (end - $(cat "$work/mark")) / 1000000 )) >> "$name.ms"
  done
  echo "| $name | $(median < "$name.ms") | $(sort -n "$name.ms" | head -1) | $(sort -n "$name.ms" | tail -1) |"
}
echo
echo "## failure-to-teardown ($runs runs; rank 1 exits 1, ranks 0,2,3 sleep)"
echo "| launcher | median ms | min ms | max ms |"
echo "|---|---|---|---|"
teardown "dlaunch --nproc 4" "$dlaunch" --nproc 4 --log-dir "$work/dl" -- ./rank.sh
teardown "torchrun --nproc_per_node 4" "$torchrun" --nproc_per_node 4 --redirects 1 --tee 1 \
  --log_dir "$work/tr" --no_python ./rank.sh
