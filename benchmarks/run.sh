#!/usr/bin/env bash
# Every side-by-side benchmark of BENCHMARKS.md, one after the other (about 15 minutes on 2 cores).
# usage: benchmarks/run.sh [BUILD_DIR]
set -euo pipefail
build=$(realpath "${1:-build}")
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
echo "# launcher: launch-to-exit and failure-to-teardown against torchrun"
"$here/launch/run.sh" "$build" 10
echo "# collectives: dlaunch preflight allreduce against torch.distributed (gloo)"
"$here/comm/run_comm_bench.sh" "$build" "$out/comm"
cat "$out/comm/summary.md"
echo "# training: dlaunch train against PyTorch DDP"
/usr/bin/python3 "$here/train/compare.py" --dlaunch "$build/launcher/dlaunch" --model mlp \
  --steps 300 --batch-size 32 --nprocs 1 2 4 --repeat 5
echo "# hang detection latency"
"$here/diagnose/run_latency.sh" "$build"
echo "# stragglers: a slowed rank named, and healthy jobs named none (10 runs per case)"
/usr/bin/python3 "$here/straggler/run.py" "$build" --runs 10
