#!/usr/bin/env bash
# Runs the torch 2.x agent tests whose verdicts must hold every time N times each (default 5) on
# the venv's torch: the hangs of FSDP2, DTensor and functional collectives (the stalled rank, its
# group and seq, its Python stack) and batch_isend_irecv's size mismatch (the sender named).
# Prints one line per case, "<case> <passed>/<runs>", and exits 1 unless every run passed.
#   benchmarks/torch2/repeat_cases.sh [BUILD_DIR] [N]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
n="${2:-5}"
python="${DLAUNCH_TORCH2_PYTHON:-$root/.venv-torch2/bin/python}"
bin="$build/tests/python/python_process_test"
[[ -x "$bin" ]] || { echo "repeat_cases: no $bin (cmake --build $build --target python_process_test)" >&2; exit 2; }
[[ -x "$python" ]] || { echo "repeat_cases: no torch 2.x venv at $python (make torch2)" >&2; exit 2; }
cases=(
  "Modes/Torch2AgentTest.HangNamesTheStalledRankGroupSeqAndStack/fsdp2"
  "Modes/Torch2AgentTest.HangNamesTheStalledRankGroupSeqAndStack/dtensor"
  "Modes/Torch2AgentTest.HangNamesTheStalledRankGroupSeqAndStack/funcol"
  "Modes/Torch2SizeMismatchTest.NamesTheSender/batch_p2p"
)
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
for c in "${cases[@]}"; do
  DLAUNCH_TEST_PYTHON="$python" timeout 1200 "$bin" --gtest_filter="$c" --gtest_repeat="$n" \
    >"$log" 2>&1 || true
  ok=$(grep -c '^\[       OK \]' "$log" || true)
  echo "$c $ok/$n"
  if [[ "$ok" != "$n" ]]; then
    status=1
    grep -A3 -m3 'Failure' "$log" | sed 's/^/  /' || true
  fi
done
exit $status
