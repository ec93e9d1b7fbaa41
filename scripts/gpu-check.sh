#!/usr/bin/env bash
# NCCL checks for a GPU machine, prepared on a build host without one.
#
#   scripts/gpu-check.sh build    # torch-free build of dlaunch, dlaunch-worker and comm_tests
#   scripts/gpu-check.sh bundle   # copy them and their shared libraries into one folder
#   scripts/gpu-check.sh run      # on the GPU machine: NCCL tests, preflight, watchdog/abort path
#   scripts/gpu-check.sh          # build + bundle, and run when a GPU is visible
#   scripts/gpu-check.sh check-busbw preflight.json   # nccl-tests' busbw formula against a run
#                                                     # (no GPU needed: any preflight.json)
#
# Environment:
#   BUILD_DIR    build folder (default: <repo>/build-gpu)
#   BUNDLE_DIR   bundle folder (default: $BUILD_DIR/bundle)
#   OUT_DIR      where `run` writes its logs and run directories (default: $BUNDLE_DIR/out)
#   BUNDLE_NCCL  1 (default) copies libnccl.so.2 from the CUDA toolkit into the bundle (~210 MB,
#                since the GPU machine may not have NCCL); 0 leaves it out, and `run` then looks
#                for it on the GPU machine (system paths, pip's nvidia-nccl-cu* package).
#   MAXBYTES     largest preflight size on the GPU (default 1G)
#   FLAG_MAXBYTES  largest size of the -G and -R preflights (default 256M)
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
FLAG_MAXBYTES="${FLAG_MAXBYTES:-256M}"
CUDA_LIB="${CUDA_LIB:-/usr/local/cuda/lib64}"

log() { echo "gpu-check: $*" >&2; }

build() {
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DDLAUNCH_WITH_TORCH=OFF \
    -DDLAUNCH_WITH_NCCL=ON
  cmake --build "$BUILD_DIR" --target dlaunch dlaunch-worker comm_tests preflight_gpu_tests \
    -j"$(nproc)"
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
    "$BUILD_DIR/tests/comm/comm_tests" "$BUILD_DIR/tests/doctor/dlaunch_doctor_test"
    "$BUILD_DIR/tests/preflight/preflight_gpu_tests")
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

# Recomputes every row's algbw and busbw from its count, element size and time with nccl-tests'
# formulas (src/<op>.cu GetBw), independently of dlaunch's op table, and compares them with what
# preflight reported (1% or 0.01 GB/s); also wants #wrong 0 wherever a column was checked.
check_busbw() {
  python3 - "$1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
n = doc["world_size"]
size = {"int8": 1, "uint8": 1, "half": 2, "bfloat16": 2, "float": 4, "int32": 4,
        "double": 8, "int64": 8}
# op: (bytes moved per unit of count, bus factor), as in nccl-tests' GetBw.
ring2 = 2.0 * (n - 1) / n
ring1 = (n - 1) / n
rule = {"allreduce": (1, ring2), "allgather": (n, ring1), "reduce_scatter": (n, ring1),
        "broadcast": (1, 1.0), "reduce": (1, 1.0), "alltoall": (n, ring1),
        "gather": (n, ring1), "scatter": (n, ring1), "sendrecv": (1, 1.0),
        # dlaunch's alltoallv (no nccl-tests program): count = elements a rank sends, busbw the
        # share that leaves the rank, 1 - 2 / (n (n + 1)).
        "alltoallv": (1, 1 - 2.0 / (n * (n + 1)))}
bad = checked = 0
for op in doc["bandwidth"]:
    if "skipped" in op:
        print(f"{op['op']}: skipped ({op['skipped']})")
        continue
    mult, factor = rule[op["op"]]
    for row in op["rows"]:
        for place, cell in (("out-of-place", row), ("in-place", row["in_place"])):
            t = cell["time_us"] * 1e-6
            algbw = row["count"] * size[row["type"]] * mult / 1e9 / t if t > 0 else 0
            busbw = algbw * factor
            checked += 1
            for name, want, got in (("algbw", algbw, cell["algbw_gbps"]),
                                    ("busbw", busbw, cell["busbw_gbps"])):
                if abs(want - got) > max(0.01 * want, 0.01):
                    bad += 1
                    print(f"{op['op']} {place} {row['size']} B: {name} {got} != nccl-tests' {want}")
            if cell["wrong"] not in (0, None):
                bad += 1
                print(f"{op['op']} {place} {row['size']} B: #wrong {cell['wrong']}")
print(f"busbw check: {checked} measurements, {bad} problems")
sys.exit(1 if bad or not checked else 0)
PY
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
  log "1/4 comm_tests (NCCL), preflight_gpu_tests (graph capture, -R 1/2, alltoallv, suite)"
  timeout 300 "$bin/comm_tests" --gtest_filter='Nccl*' 2>&1 | tee "$OUT_DIR/comm_tests.txt" || failed=1
  timeout 300 "$bin/preflight_gpu_tests" 2>&1 | tee "$OUT_DIR/preflight_gpu_tests.txt" || failed=1

  # 2. Preflight on NCCL, every op (nccl-tests' eight, reduce, gather and scatter included, and
  #    alltoallv), both column groups (out-of-place and in-place), verified at every size; world
  #    size 1, then one rank per GPU. Then the same with nccl-tests' -G 2 (the timed iterations
  #    captured into a CUDA graph launched twice), -R 1 (ncclCommRegister'ed buffers) and -R 2
  #    (symmetric windows). The plain tables are kept as fixtures for tests/preflight
  #    (fixtures/gpu/), and every row's busbw is checked against nccl-tests' formula.
  local rc=0 world variant
  for world in 1 "$gpus"; do
    [[ "$world" -ge 1 ]] || continue
    for variant in plain G2 R1 R2; do
      local id="nccl-preflight-$world" flags=() maxbytes="$MAXBYTES"
      case "$variant" in
        G2) flags=(-G 2) ;;
        R1) flags=(-R 1) ;;
        R2) flags=(-R 2) ;;
      esac
      if [[ "$variant" != plain ]]; then
        id="nccl-preflight-$world-$variant"
        maxbytes="$FLAG_MAXBYTES"
      fi
      log "2/4 dlaunch --nproc $world preflight --backend nccl ${flags[*]} (every op)"
      rc=0
      timeout 600 "$bin/dlaunch" --nproc "$world" --skip-doctor --log-dir "$OUT_DIR/logs" \
        --run-id "$id" \
        preflight --backend nccl -b 8 -e "$maxbytes" -f 2 -w 5 -n 20 -T 60 --no-hang-test \
        "${flags[@]}" 2>&1 | tee "$OUT_DIR/preflight-$world-$variant.txt" || rc=$?
      log "preflight --nproc $world ${flags[*]} exit code $rc (want 0)"
      [[ "$rc" -eq 0 ]] || failed=1
      local run="$OUT_DIR/logs/$id"
      if [[ ! -f "$run/preflight.json" ]]; then
        log "no preflight.json from --nproc $world ${flags[*]}"
        failed=1
        continue
      fi
      check_busbw "$run/preflight.json" 2>&1 | tee "$OUT_DIR/busbw-check-$world-$variant.txt" ||
        failed=1
      [[ "$variant" == plain ]] || continue
      cp "$run/rank0/stdout.log" "$OUT_DIR/nccl_preflight_${world}ranks.txt"
      # The real NCCL INFO log of every rank (preflight turns it on by default), kept as a
      # fixture for tests/nccl_log, with what `dlaunch diagnose --nccl-log` makes of it.
      cat "$run"/rank*/nccl.log > "$OUT_DIR/nccl_info_${world}ranks.log" 2>/dev/null || true
      "$bin/dlaunch" diagnose --nccl-log "$run"/rank*/nccl.log \
        > "$OUT_DIR/nccl_log_analysis_${world}ranks.txt" 2>&1 || failed=1
    done
    [[ "$gpus" -ge 2 ]] || break
  done
  log "fixtures for tests/preflight/fixtures/gpu/: $OUT_DIR/nccl_preflight_*ranks.txt"
  log "fixtures for tests/nccl_log/fixtures/: $OUT_DIR/nccl_info_*ranks.log"

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
  # fp16 autocast + gradient scaler (`train --amp fp16`), when the bundled worker has CUDA libtorch.
  if "$bin/dlaunch-worker" train --help >/dev/null 2>&1; then timeout 300 "$bin/dlaunch" --nproc 1 --skip-doctor --log-dir "$OUT_DIR/logs" --run-id train-amp-fp16 train --device cuda --amp fp16 --steps 300 --eval-every 100 --no-preflight 2>&1 | tee "$OUT_DIR/train-amp-fp16.txt" || failed=1; else log "train --amp fp16 skipped: this worker has no libtorch"; fi
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
  check-busbw)
    [[ -n "${2:-}" ]] || { echo "usage: $0 check-busbw PREFLIGHT_JSON" >&2; exit 2; }
    check_busbw "$2"
    ;;
  all)
    build
    bundle
    if [[ "$(gpu_count)" -ge 1 ]]; then run; else log "no GPU here: bundle ready, run it on a GPU machine"; fi
    ;;
  *) echo "usage: $0 [build|bundle|run|all|check-busbw FILE]" >&2; exit 2 ;;
esac
