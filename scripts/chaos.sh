#!/usr/bin/env bash
# The long fault campaign (`make chaos`): >= 50 random rank kills, 20 launcher SIGKILLs (ranks and
# their children counted), 5 SIGSTOP teardowns, 150+ bad command lines, a corpus of corrupt and
# 100 randomly damaged run directories; then RELIABILITY.md from the measurements.
# Usage: scripts/chaos.sh [BUILD_DIR] [OUTPUT.md]
set -euo pipefail
build=${1:-build}
out=${2:-RELIABILITY.md}
here=$(cd "$(dirname "$0")" && pwd)
bin="$build/tests/chaos/chaos_test"
[ -x "$bin" ] || { echo "chaos: $bin not built (make build)" >&2; exit 2; }
results=$(mktemp /tmp/dlaunch-chaos.XXXXXX.jsonl)
trap 'rm -f "$results"' EXIT
status=0
# The disabled trials too: their figures belong in the table even while they fail.
DLAUNCH_CHAOS_LONG=1 DLAUNCH_CHAOS_RESULTS="$results" \
  timeout 3600 "$bin" --gtest_also_run_disabled_tests --gtest_brief=1 || status=$?
# Forged and malformed calls to every RPC of the coordinator (#30).
DLAUNCH_CHAOS_RESULTS="$results" timeout 600 "$build/tests/chaos/chaos_control_plane_test" \
  --gtest_brief=1 || status=$?
# Hostile torch dumps under `dlaunch diagnose` and a launcher (#30).
DLAUNCH_CHAOS_RESULTS="$results" timeout 900 "$build/tests/chaos/chaos_evidence_bomb_test" \
  --gtest_brief=1 || status=$?
# Shared-memory ranks of train killed (in set-up and training) and stopped, and damaged
# checkpoints and killed checkpoint writers (#30), where train is built.
for t in chaos_shm_test chaos_checkpoint_test; do
  if [ -x "$build/tests/chaos/$t" ]; then
    DLAUNCH_CHAOS_LONG=1 DLAUNCH_CHAOS_RESULTS="$results" timeout 1800 \
      "$build/tests/chaos/$t" --gtest_brief=1 || status=$?
  fi
done
# Elastic train resuming its checkpoint with fewer ranks after a node is SIGKILLed (#30).
if [ -x "$build/tests/multinode/elastic_test" ]; then
  DLAUNCH_CHAOS_RESULTS="$results" timeout 1800 "$build/tests/multinode/elastic_test" \
    --gtest_filter='*AfterAScaleDownTrainResumes*' --gtest_repeat=5 --gtest_brief=1 || status=$?
fi
python3 "$here/chaos_report.py" "$results" "$out" "$(uname -srm), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "chaos: wrote $out (trials exit status $status)"
exit "$status"
