#!/usr/bin/env bash
# NCCL checks for a GPU machine, prepared on a build host without one.
#
#   scripts/gpu-check.sh build    # torch-free build of dlaunch, dlaunch-worker and comm_tests
#   scripts/gpu-check.sh bundle   # copy them and their shared libraries into one folder
#   scripts/gpu-check.sh run      # on the GPU machine: NCCL tests, preflight, watchdog/abort path
#   scripts/gpu-check.sh          # build + bundle, and run when a GPU is visible
#
# Environment:
#   BUILD_DIR    build folder (default: <repo>/build-gpu)
#   BUNDLE_DIR   bundle folder (default: $BUILD_DIR/bundle)
#   OUT_DIR      where `run` writes its logs and run directories (default: $BUNDLE_DIR/out)
#   BUNDLE_NCCL  1 (default) copies libnccl.so.2 from the CUDA toolkit into the bundle (~210 MB,
#                since the GPU machine may not have NCCL); 0 leaves it out, and `run` then looks
#                for it on the GPU machine (system paths, pip's nvidia-nccl-cu* package).
#   MAXBYTES     largest preflight size on the GPU (default 1G)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-gpu}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -z "${BUNDLE_DIR:-}" && -x "$HERE/bin/dlaunch-worker" ]]; then
  BUNDLE_DIR="$HERE"  # this copy of the script lives inside a bundle
fi
BUNDLE_DIR="${BUNDLE_DIR:-$BUILD_DIR/bundle}"
OUT_DIR="${OUT_DIR:-$BUNDLE_DIR/out}"
BUNDLE_NCCL="${BUNDLE_NCCL:-1}"
MAXBYTES="${MAXBYTES:-1G}"
CUDA_LIB="${CUDA_LIB:-/usr/local/cuda/lib64}"

log() { echo "gpu-check: $*" >&2; }

build() {
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DDLAUNCH_WITH_TORCH=OFF \
    -DDLAUNCH_WITH_NCCL=ON
  cmake --build "$BUILD_DIR" --target dlaunch dlaunch-worker comm_tests -j"$(nproc)"
}

# Libraries every Linux has (glibc, the loader) and the driver's libcuda, which must come from
# the GPU machine itself, stay out of the bundle.
is_system_lib() {
  case "$(basename "$1")" in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux*.so* | \
      libresolv.so* | libutil.so* | libcuda.so* | libnvidia-*.so* | linux-vdso.so*)
      return 0 ;;
  esac
  return 1
}

bundle() {
  local bins=("$BUILD_DIR/launcher/dlaunch" "$BUILD_DIR/worker/dlaunch-worker"
    "$BUILD_DIR/tests/comm/comm_tests" "$BUILD_DIR/tests/doctor/dlaunch_doctor_test")
  rm -rf "$BUNDLE_DIR"
  mkdir -p "$BUNDLE_DIR/bin" "$BUNDLE_DIR/lib"
  for bin in "${bins[@]}"; do
    [[ -x "$bin" ]] || { log "missing $bin (run: $0 build)"; exit 2; }
    cp "$bin" "$BUNDLE_DIR/bin/"
    # ldd resolves the whole closure; keep what is not part of the base system.
    ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do
      is_system_lib "$lib" && continue
      case "$(basename "$lib")" in libnccl.so*) continue ;; esac
      cp -nL "$lib" "$BUNDLE_DIR/lib/" 2>/dev/null || true
    done
  done
  if [[ "$BUNDLE_NCCL" == 1 ]]; then
    cp -L "$CUDA_LIB/libnccl.so.2" "$BUNDLE_DIR/lib/"
  fi
  cp "$0" "$BUNDLE_DIR/gpu-check.sh"
  log "bundle in $BUNDLE_DIR ($(du -sh "$BUNDLE_DIR" | cut -f1)); on the GPU machine run:"
  log "  <that folder>/gpu-check.sh run"
}

find_nccl() {
  [[ -e "$BUNDLE_DIR/lib/libnccl.so.2" ]] && return 0
  local dir
  for dir in /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 /usr/local/nccl/lib; do
    [[ -e "$dir/libnccl.so.2" ]] && { echo "$dir"; return 0; }
  done
  dir="$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)"
  [[ -n "$dir" && -e "$dir/libnccl.so.2" ]] && { echo "$dir"; return 0; }
  return 1
}

gpu_count() {
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true
  else
    echo 0
  fi
}

run() {
  local bin="$BUNDLE_DIR/bin"
  local extra
  extra="$(find_nccl)" || { log "no libnccl.so.2 in the bundle or on this machine"; exit 2; }
  export LD_LIBRARY_PATH="$BUNDLE_DIR/lib${extra:+:$extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export DLAUNCH_WORKER="$bin/dlaunch-worker"
  local gpus
  gpus="$(gpu_count)"
  mkdir -p "$OUT_DIR"
  log "GPUs visible: $gpus"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 |
      tee "$OUT_DIR/nvidia-smi.txt" || true
  fi
  [[ "$gpus" -ge 1 ]] || { log "no GPU visible: nothing to run"; exit 2; }
  local failed=0

  # 1. The NCCL communicator: allreduce on the device, and the watchdog aborting a communicator
  #    whose peer never arrives (the non-blocking init is polled and ncclCommAbort'ed on time).
  log "1/4 comm_tests (NCCL)"
  timeout 300 "$bin/comm_tests" --gtest_filter='Nccl*' 2>&1 | tee "$OUT_DIR/comm_tests.txt" || failed=1

  # 2. Preflight, world size 1, NCCL: the bandwidth sweep with verification at every size.
  log "2/4 dlaunch --nproc 1 preflight --backend nccl"
  local rc=0
  timeout 600 "$bin/dlaunch" --nproc 1 --skip-doctor --log-dir "$OUT_DIR/logs" --run-id nccl-preflight \
    preflight --backend nccl -b 8 -e "$MAXBYTES" -f 2 -w 5 -n 20 --collective-timeout 60 \
    2>&1 | tee "$OUT_DIR/preflight.txt" || rc=$?
  log "preflight exit code $rc (want 0)"
  [[ "$rc" -eq 0 ]] || failed=1

  # 3. The watchdog/abort path across ranks: one rank skips a collective and the others must
  #    name it within the timeout + 1 s. Needs one GPU per rank.
  if [[ "$gpus" -ge 2 ]]; then
    log "3/4 dlaunch --nproc 2 preflight --backend nccl (hang test)"
    rc=0
    timeout 300 "$bin/dlaunch" --nproc 2 --skip-doctor --log-dir "$OUT_DIR/logs" --run-id nccl-hang \
      preflight --backend nccl --ops allreduce -b 1M -e 64M -f 4 --collective-timeout 5 \
      2>&1 | tee "$OUT_DIR/hang.txt" || rc=$?
    log "hang test exit code $rc (want 0)"
    [[ "$rc" -eq 0 ]] || failed=1
  else
    log "3/4 skipped: the cross-rank hang test needs 2 GPUs (the abort path ran in step 1)"
  fi
  # 4. dlaunch doctor against the real driver and GPU: the report for the log, and the JSON to keep
  #    as tests/doctor/fixtures/doctor_output_<gpu>.json (a test replays every such file).
  log "4/4 dlaunch doctor"
  rc=0
  "$bin/dlaunch" doctor 2>&1 | tee "$OUT_DIR/doctor.txt" || rc=$?
  log "doctor exit code $rc (0 clean, 1 a check failed)"
  "$bin/dlaunch" doctor --json > "$OUT_DIR/doctor_output_gpu.json" || true
  timeout 120 "$bin/dlaunch_doctor_test" 2>&1 | tee "$OUT_DIR/doctor_test.txt" || failed=1
  log "results in $OUT_DIR; $([[ $failed -eq 0 ]] && echo PASS || echo FAIL)"
  return "$failed"
}

case "${1:-all}" in
  build) build ;;
  bundle) bundle ;;
  run) run ;;
  all)
    build
    bundle
    if [[ "$(gpu_count)" -ge 1 ]]; then run; else log "no GPU here: bundle ready, run it on a GPU machine"; fi
    ;;
  *) echo "usage: $0 [build|bundle|run|all]" >&2; exit 2 ;;
esac
