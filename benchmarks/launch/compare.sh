#!/usr/bin/env bash
# Launch-to-exit of two dlaunch binaries, interleaved: ROUNDS rounds of hyperfine (-N, 2 warm-ups,
# 10 runs per command), the binaries' order swapped every round, 4 and 8 ranks of /bin/true.
# usage: benchmarks/launch/compare.sh BEFORE AFTER [ROUNDS]
set -euo pipefail
before=$(realpath "$1")
after=$(realpath "$2")
rounds=${3:-6}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for round in $(seq "$rounds"); do
  args=()
  if ((round % 2)); then order="before after"; else order="after before"; fi
  for n in 4 8; do
    for which in $order; do
      bin=$before
      [[ $which == after ]] && bin=$after
      args+=(-n "$which $n" "$bin --nproc $n --log-dir $work/dl -- /bin/true")
    done
  done
  hyperfine -N --warmup 2 --runs 10 --export-json "$work/round$round.json" "${args[@]}" >/dev/null
done
python3 - "$work"/round*.json <<'PY'
import json, statistics, sys
times, medians = {}, {}
for path in sys.argv[1:]:
    for r in json.load(open(path))["results"]:
        times.setdefault(r["command"], []).extend(r["times"])
        medians.setdefault(r["command"], []).append(r["median"])
print("| command | median ms (all runs) | min ms | max ms | round medians ms |")
print("|---|---|---|---|---|")
for name in ("before 4", "after 4", "before 8", "after 8"):
    t = times[name]
    rounds = " ".join(f"{m * 1e3:.1f}" for m in medians[name])
    print(f"| {name} | {statistics.median(t) * 1e3:.1f} | {min(t) * 1e3:.1f} | {max(t) * 1e3:.1f} | {rounds} |")
PY
