#!/usr/bin/env bash
# NCCL checks for a GPU machine, prepared on a build host without one.
#
#   scripts/gpu-check.sh build    # torch-free build of dlaunch, dlaunch-worker and comm_tests
#   scripts/gpu-check.sh bundle   # copy them and their shared libraries into one folder
#   scripts/gpu-check.sh run      # on the GPU machine: NCCL tests, preflight, watchdog/abort path
#   scripts/gpu-check.sh          # build + bundle, and run when a GPU is visible
#   scripts/gpu-check.sh check-busbw preflight.json   # nccl-tests' busbw formula against a run
#                                                     # (no GPU needed: any preflight.json)
#   scripts/gpu-check.sh import RESULTS   # add the fixtures a `run` recorded to tests/ (RESULTS:
#                                         # its results folder or gpu-check-fixtures.tar.gz)
#   scripts/gpu-check.sh dryrun   # `run` without a GPU: gloo instead of NCCL, binaries of
#                                 # $BUILD_DIR (default build/), to try the parts and the packing
#
# `run` is bounded (DEADLINE_S, default 330 s, packing included) and runs its parts one by one:
# a part that fails or runs out of time is recorded and the next one runs. After every part it
# packs what it has into RESULTS_DIR: gpu-check-results.json (each part's status, exit code and
# seconds; the GPU and NCCL), gpu-check-fixtures.tar.gz (the recorded tables, preflight.json and
# doctor output, at their paths under tests/) and gpu-check-logs.tar.gz (every log). docs/gpu-check.md
# says how to run it on a lent machine and turn the results into fixtures.
#
# Environment:
#   BUILD_DIR    build folder (default: <repo>/build-gpu)
#   BUNDLE_DIR   bundle folder (default: $BUILD_DIR/bundle)
#   OUT_DIR      where `run` writes its logs and run directories (default: $BUNDLE_DIR/out, or
#                a folder under /tmp when RESULTS_DIR is set)
#   RESULTS_DIR  where `run` packs its results (default: $OUT, the folder a lent device machine
#                copies back, else $OUT_DIR)
#   DEADLINE_S   seconds the whole `run` may take (default 330)
#   BUNDLE_NCCL  1 (default) copies libnccl.so.2 from the CUDA toolkit into the bundle (~210 MB,
#                since the GPU machine may not have NCCL); 0 leaves it out, and `run` then looks
#                for it on the GPU machine (system paths, pip's nvidia-nccl-cu* package).
#   MAXBYTES     largest preflight size on the GPU (default 256M; every size is verified on the host)
#   FLAG_MAXBYTES  largest size of the -G and -R preflights (default 64M)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
USER_BUILD_DIR="${BUILD_DIR:-}"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-gpu}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -z "${BUNDLE_DIR:-}" && -x "$HERE/bin/dlaunch-worker" ]]; then
  BUNDLE_DIR="$HERE"  # this copy of the script lives inside a bundle
fi
BUNDLE_DIR="${BUNDLE_DIR:-$BUILD_DIR/bundle}"
RESULTS_DIR="${RESULTS_DIR:-${OUT:-}}"
if [[ -n "$RESULTS_DIR" ]]; then
  OUT_DIR="${OUT_DIR:-/tmp/dlaunch-gpu-check}"  # the results folder takes only a few files
else
  OUT_DIR="${OUT_DIR:-$BUNDLE_DIR/out}"
  RESULTS_DIR="$OUT_DIR"
fi
BUNDLE_NCCL="${BUNDLE_NCCL:-1}"
MAXBYTES="${MAXBYTES:-256M}"
FLAG_MAXBYTES="${FLAG_MAXBYTES:-64M}"
DEADLINE_S="${DEADLINE_S:-330}"
BACKEND=nccl
CUDA_LIB="${CUDA_LIB:-/usr/local/cuda/lib64}"

log() { echo "gpu-check: $*" >&2; }

build() {
  # The default build type (RelWithDebInfo), so that ccache serves what the main build compiled;
  # the bundle strips the debug information.
  cmake -S "$ROOT" -B "$BUILD_DIR" -DDLAUNCH_WITH_TORCH=OFF -DDLAUNCH_WITH_NCCL=ON
  cmake --build "$BUILD_DIR" --target dlaunch dlaunch-worker comm_tests preflight_gpu_tests \
    dlaunch_doctor_test -j"$(nproc)"
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
  mkdir -p "$BUNDLE_DIR/bin" "$BUNDLE_DIR/lib/cxx"
  for bin in "${bins[@]}"; do
    [[ -x "$bin" ]] || { log "missing $bin (run: $0 build)"; exit 2; }
    cp "$bin" "$BUNDLE_DIR/bin/"
    strip --strip-debug "$BUNDLE_DIR/bin/$(basename "$bin")"
    # ldd resolves the whole closure; keep what is not part of the base system. The C++ runtime
    # goes aside: `run` uses it only where the GPU machine's own is older than the binaries need.
    ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do
      is_system_lib "$lib" && continue
      case "$(basename "$lib")" in
        libnccl.so*) continue ;;
        libstdc++.so* | libgcc_s.so*) cp -nL "$lib" "$BUNDLE_DIR/lib/cxx/" 2>/dev/null || true ;;
        *) cp -nL "$lib" "$BUNDLE_DIR/lib/" 2>/dev/null || true ;;
      esac
    done
  done
  objdump -T "$BUNDLE_DIR"/bin/* | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1 \
    > "$BUNDLE_DIR/lib/cxx/needs"
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

# --- parts, results and packing ---------------------------------------------------------------
# Every part of `run` goes through `part NAME CAP_S COMMAND...`: COMMAND (a program or one of the
# functions below) gets at most CAP_S seconds, fewer when the run's deadline is nearer; its output
# goes to the console and to $OUT_DIR/parts/NAME.txt; its status (pass, fail, timeout, skipped)
# goes to $OUT_DIR/parts.tsv; then the results are packed. A failing part never stops the run.
PACK_RESERVE_S=15

part() {
  local name="$1" cap="$2"
  shift 2
  local left=$((DEADLINE_S - PACK_RESERVE_S - SECONDS))
  if ((left < 10)); then
    log "$name: skipped, the run's ${DEADLINE_S}s are spent"
    printf '%s\tskipped\t-\t0\n' "$name" >> "$OUT_DIR/parts.tsv"
    pack
    return 0
  fi
  ((cap > left)) && cap=$left
  log "$name (at most ${cap}s)"
  local t0=$SECONDS rc=0 status=pass
  # timeout signals its whole process group: the launcher, its ranks and the test binaries.
  timeout -k 10 "$cap" bash -c '"$@"' part "$@" 2>&1 | tee "$OUT_DIR/parts/$name.txt" || rc=$?
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    status=timeout
  elif [[ $rc -ne 0 ]]; then
    status=fail
  fi
  log "$name: $status (exit $rc, $((SECONDS - t0))s)"
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$rc" "$((SECONDS - t0))" >> "$OUT_DIR/parts.tsv"
  pack
}

# A file name part from the GPU's name: "NVIDIA H200" -> "nvidia-h200".
gpu_tag() {
  local name
  name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)"
  [[ -n "$name" ]] || name=cpu
  echo "$name" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9.' '-' | sed 's/^-*//; s/-*$//'
}

# gpu-check-results.json, gpu-check-fixtures.tar.gz and gpu-check-logs.tar.gz into RESULTS_DIR,
# each time anew, so that a run cut short still leaves what it had. The fixtures archive holds
# paths relative to the repository root (`import` unpacks it there).
pack() {
  mkdir -p "$RESULTS_DIR"
  python3 - "$OUT_DIR" "$DEADLINE_S" "$SECONDS" "$BACKEND" > "$RESULTS_DIR/gpu-check-results.json" <<'PY' ||
import json, os, sys
out, deadline, elapsed, backend = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
parts = []
if os.path.exists(f"{out}/parts.tsv"):
    for line in open(f"{out}/parts.tsv"):
        name, status, rc, secs = line.rstrip("\n").split("\t")
        parts.append({"name": name, "status": status,
                      "exit_code": None if rc == "-" else int(rc), "seconds": int(secs)})
def read(name):
    path = f"{out}/{name}"
    return open(path).read().strip() if os.path.exists(path) else None
fixtures = []
for root, _, files in os.walk(f"{out}/fixtures"):
    fixtures += sorted(os.path.relpath(os.path.join(root, f), f"{out}/fixtures") for f in files)
print(json.dumps({"schema": 1, "backend": backend, "gpu": read("nvidia-smi.txt"),
                  "nccl_version": read("nccl_version.txt"), "deadline_s": deadline,
                  "elapsed_s": elapsed, "verdict": "PASS" if parts and all(
                      p["status"] == "pass" for p in parts) else "FAIL",
                  "parts": parts, "fixtures": sorted(fixtures)}, indent=1))
PY
    log "could not write gpu-check-results.json"
  tar -czf "$RESULTS_DIR/gpu-check-fixtures.tar.gz" -C "$OUT_DIR/fixtures" . 2>/dev/null || true
  [[ "$RESULTS_DIR" != "$OUT_DIR" ]] || return 0
  # Each file that comes back from a device machine may hold 16 MiB: the run directories go first
  # when the logs do not fit.
  tar -czf "$RESULTS_DIR/gpu-check-logs.tar.gz" -C "$OUT_DIR" --exclude=./fixtures . 2>/dev/null
  if [[ $(stat -c %s "$RESULTS_DIR/gpu-check-logs.tar.gz" 2>/dev/null || echo 0) -gt 15000000 ]]; then
    tar -czf "$RESULTS_DIR/gpu-check-logs.tar.gz" -C "$OUT_DIR" --exclude=./fixtures \
      --exclude=./logs . 2>/dev/null || true
  fi
}

# --- the parts ---------------------------------------------------------------------------------
# One preflight over every op, both column groups verified at every size: `preflight_part WORLD
# VARIANT MAXBYTES [FLAGS...]`. Keeps rank 0's table and preflight.json as fixtures and checks
# every row's busbw against nccl-tests' formula.
preflight_part() {
  local world="$1" variant="$2" maxbytes="$3"
  shift 3
  local id="preflight-$world-$variant" rc=0
  "$BIN/dlaunch" --nproc "$world" --skip-doctor --log-dir "$OUT_DIR/logs" --run-id "$id" \
    preflight --backend "$BACKEND" -b 8 -e "$maxbytes" -f 2 -w 5 -n 20 -T 60 --no-hang-test \
    "$@" || rc=$?
  local run="$OUT_DIR/logs/$id"
  [[ -f "$run/preflight.json" ]] || { log "no preflight.json from $id"; return 1; }
  local fixture="$OUT_DIR/fixtures/tests/preflight/fixtures/gpu/$TAG-${world}ranks-$variant"
  mkdir -p "$(dirname "$fixture")"
  cp "$run/preflight.json" "$fixture.json"
  cp "$run/rank0/stdout.log" "$fixture.txt" 2>/dev/null || log "no rank 0 stdout.log in $run"
  check_busbw "$run/preflight.json" || rc=1
  return "$rc"
}

# A GoogleTest binary that must really run here: a test skipped on a GPU machine (no device seen,
# no NCCL build) fails the part. `gtest_part BINARY [GTEST FLAGS...]`.
gtest_part() {
  local bin="$1" out rc=0
  out="$OUT_DIR/parts/gtest-$(basename "$1").log"
  shift
  "$bin" "$@" 2>&1 | tee "$out" || rc=$?
  if grep -q '^\[  SKIPPED \]' "$out"; then
    log "$(basename "$bin"): tests skipped although a GPU is visible"
    return 1
  fi
  return "$rc"
}

# The real NCCL INFO log of every rank of the plain preflight (preflight turns it on), and what
# `dlaunch diagnose --nccl-log` makes of it; kept with the logs.
nccl_log_part() {
  local run="$OUT_DIR/logs/preflight-$1-plain"
  ls "$run"/rank*/nccl.log >/dev/null 2>&1 || { log "no nccl.log in $run"; return 1; }
  cat "$run"/rank*/nccl.log > "$OUT_DIR/nccl_info_$1ranks.log"
  "$BIN/dlaunch" diagnose --nccl-log "$run"/rank*/nccl.log
}

# dlaunch doctor against the real driver and GPU: its report, and its JSON as the fixture
# tests/doctor/fixtures/doctor_output_<gpu>.json (a test there replays every such file).
doctor_part() {
  local rc=0
  "$BIN/dlaunch" doctor || rc=$?
  log "doctor exit code $rc (0 clean, 1 a check failed)"
  mkdir -p "$OUT_DIR/fixtures/tests/doctor/fixtures"
  "$BIN/dlaunch" doctor --json > "$OUT_DIR/fixtures/tests/doctor/fixtures/doctor_output_$TAG.json" ||
    true
  [[ -x "$BIN/dlaunch_doctor_test" ]] || return 0
  "$BIN/dlaunch_doctor_test"
}

# The rank of --gpu-binding isolate --numa-binding node prints its CUDA_VISIBLE_DEVICES and CPUs;
# they must be GPU 0 and CPUs of GPU 0's NUMA node.
placement_part() {
  local out="$OUT_DIR/parts/placement-check.txt" bus numa
  # shellcheck disable=SC2016  # the rank's shell expands them
  "$BIN/dlaunch" --nproc 1 --skip-doctor --log-dir "$OUT_DIR/logs" --run-id placement \
    --gpu-binding isolate --numa-binding node /bin/sh -c \
    'echo "rank CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES CPUs $(grep Cpus_allowed_list /proc/self/status | cut -f2)"' |
    tee "$out"
  bus="$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 2>/dev/null | tr A-F a-f | sed 's/^0000//')"
  numa="$(cat "/sys/bus/pci/devices/$bus/numa_node" 2>/dev/null || echo -1)"
  echo "GPU 0 ($bus): NUMA node $numa, CPUs $(cat "/sys/devices/system/node/node$numa/cpulist" 2>/dev/null || echo any)" |
    tee -a "$out"
  python3 - "$out" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
cpus = lambda s: {c for p in s.split(",") for a, _, b in [p.partition("-")] for c in range(int(a), int(b or a) + 1)}
rank = re.search(r"rank CUDA_VISIBLE_DEVICES=(\S*) CPUs (\S+)", text)
node = re.search(r"NUMA node \S+, CPUs ([0-9][-0-9,]*)", text)
ok = rank and rank[1] == "0" and (not node or cpus(rank[2]) <= cpus(node[1]))
print("placement:", "PASS" if ok else "FAIL"); sys.exit(0 if ok else 1)
PY
}

# A short CUDA training with fp16 autocast and the gradient scaler; passes (as skipped) when the
# bundled worker's libtorch was built without CUDA, as Debian's is.
train_fp16_part() {
  local out="$OUT_DIR/parts/train-amp-fp16-run.txt" rc
  "$BIN/dlaunch" --nproc 1 --skip-doctor --log-dir "$OUT_DIR/logs" --run-id train-amp-fp16 \
    train --device cuda --amp fp16 --steps 300 --eval-every 100 --no-preflight 2>&1 |
    tee "$out"
  rc=${PIPESTATUS[0]}
  if grep -q "this build's libtorch has no CUDA\|built without libtorch" "$out"; then
    log "train --amp fp16 skipped: the worker's libtorch has no CUDA"
    return 0
  fi
  return "$rc"
}

nccl_version() {
  # The version the bundled or found libnccl reports, from the NCCL INFO log of a preflight.
  grep -ho 'NCCL version [0-9.]*[^ ]*' "$OUT_DIR"/logs/*/rank0/nccl.log 2>/dev/null | head -1 |
    sed 's/NCCL version //' > "$OUT_DIR/nccl_version.txt" || true
}

setup_run() {
  BIN="$BUNDLE_DIR/bin"
  if [[ "$BACKEND" == nccl ]]; then
    local extra
    extra="$(find_nccl)" || { log "no libnccl.so.2 in the bundle or on this machine"; exit 2; }
    export LD_LIBRARY_PATH="$BUNDLE_DIR/lib${extra:+:$extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # The bundled C++ runtime only where the system's lacks the newest symbol version the
    # binaries use (a newer system one serves them, and NCCL and Python, better).
    local needs system_cxx
    needs="$(cat "$BUNDLE_DIR/lib/cxx/needs" 2>/dev/null || true)"
    system_cxx="$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ && !f {print $NF; f = 1}')"
    if [[ -n "$needs" ]] && ! grep -qa "$needs" "${system_cxx:-/nonexistent}" 2>/dev/null; then
      log "the system's libstdc++ lacks $needs: using the bundled one"
      export LD_LIBRARY_PATH="$BUNDLE_DIR/lib/cxx:$LD_LIBRARY_PATH"
    fi
  fi
  export DLAUNCH_WORKER="$BIN/dlaunch-worker"
  rm -rf "$OUT_DIR/parts" "$OUT_DIR/parts.tsv" "$OUT_DIR/fixtures" "$OUT_DIR/logs"
  mkdir -p "$OUT_DIR/parts" "$OUT_DIR/fixtures"
  SECONDS=0
  # The parts run in child shells (`part` runs them under timeout).
  export BIN OUT_DIR BACKEND TAG
  export -f log check_busbw gtest_part preflight_part nccl_log_part doctor_part placement_part \
    train_fp16_part
}

run() {
  setup_run
  local gpus
  gpus="$(gpu_count)"
  TAG="$(gpu_tag)"
  log "GPUs visible: $gpus; results in $RESULTS_DIR; at most ${DEADLINE_S}s"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
      > "$OUT_DIR/nvidia-smi.txt" 2>/dev/null || true
  fi
  [[ "$gpus" -ge 1 ]] || { log "no GPU visible: nothing to run"; pack; exit 2; }
  local world=1 variant
  [[ "$gpus" -ge 2 ]] && world="$gpus"

  # 1. The NCCL communicator on the device: allreduce, graph capture (ops run on launch, not on
  #    capture), -R 1 and -R 2 buffers, alltoallv, the suite with -G and -R, and the watchdog
  #    aborting a communicator whose peer never arrives.
  part comm_tests 120 gtest_part "$BIN/comm_tests" --gtest_filter='Nccl*'
  part preflight_gpu_tests 120 gtest_part "$BIN/preflight_gpu_tests"

  # 2. Preflight on NCCL, every op (nccl-tests' eight, reduce, gather and scatter included, and
  #    alltoallv), both column groups, verified at every size, one rank per GPU: plain, then with
  #    nccl-tests' -G 2 (the timed iterations captured into a CUDA graph launched twice), -R 1
  #    (ncclCommRegister'ed buffers) and -R 2 (symmetric windows). Tables and preflight.json
  #    become fixtures; every row's busbw is checked against nccl-tests' formula.
  part "preflight-$world-plain" 120 preflight_part "$world" plain "$MAXBYTES"
  part "nccl-log-$world" 30 nccl_log_part "$world"
  nccl_version
  for variant in G2 R1 R2; do
    part "preflight-$world-$variant" 60 preflight_part "$world" "$variant" "$FLAG_MAXBYTES" \
      "-${variant:0:1}" "${variant:1}"
  done

  # 3. The watchdog/abort path across ranks: one rank skips a collective and the others must
  #    name it within the timeout + 1 s. Needs one GPU per rank.
  if [[ "$gpus" -ge 2 ]]; then
    part hang-test 60 "$BIN/dlaunch" --nproc 2 --skip-doctor --log-dir "$OUT_DIR/logs" \
      --run-id nccl-hang preflight --backend nccl --ops allreduce -b 1M -e 64M -f 4 \
      --collective-timeout 5
  fi

  # Placement on the real topology: GPU 0 and CPUs of GPU 0's NUMA node.
  part placement 60 placement_part

  # fp16 autocast + gradient scaler (`train --amp fp16`).
  part train-amp-fp16 300 train_fp16_part

  # 4. dlaunch doctor against the real driver and GPU.
  part doctor 60 doctor_part

  # Further checks go here, each as one `part` line.

  pack
  local verdict
  verdict="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' \
    "$RESULTS_DIR/gpu-check-results.json" 2>/dev/null || echo FAIL)"
  log "$verdict in ${SECONDS}s; results in $RESULTS_DIR (docs/gpu-check.md: turning them into fixtures)"
  [[ "$verdict" == PASS ]]
}

# `run` on this machine without a GPU: the parts, the packing and `import` tried on gloo, two
# ranks, the binaries of $BUILD_DIR (-G and -R are NCCL-only, so those parts are left out).
dryrun() {
  BACKEND=gloo
  local base build="${USER_BUILD_DIR:-$ROOT/build}" b
  base="$(mktemp -d /tmp/dlaunch-gpu-check-dryrun.XXXXXX)"
  BUNDLE_DIR="$base/bundle" OUT_DIR="$base/out" RESULTS_DIR="$base/results"
  mkdir -p "$BUNDLE_DIR/bin"
  for b in launcher/dlaunch worker/dlaunch-worker tests/doctor/dlaunch_doctor_test; do
    [[ -x "$build/$b" ]] || { log "missing $build/$b"; exit 2; }
    ln -s "$build/$b" "$BUNDLE_DIR/bin/"
  done
  setup_run
  TAG=dryrun-cpu
  log "dry run on gloo; results in $RESULTS_DIR"
  part preflight-2-plain 120 preflight_part 2 plain 1M --ops allreduce,alltoallv --no-p2p
  part doctor 60 doctor_part
  pack
  log "dry run done in ${SECONDS}s: $RESULTS_DIR/gpu-check-results.json"
}

# Unpacks the fixtures of a `run` into the repository (or IMPORT_ROOT): only paths under
# tests/preflight/fixtures/gpu/ and tests/doctor/fixtures/ are accepted.
import_fixtures() {
  local src="$1" tarball="$1" dest="${IMPORT_ROOT:-$ROOT}"
  [[ -d "$src" ]] && tarball="$src/gpu-check-fixtures.tar.gz"
  [[ -f "$tarball" ]] || { log "no fixtures archive at $tarball"; exit 2; }
  local bad
  bad="$(tar -tzf "$tarball" | grep -v '/$' |
    grep -Ev '^(\./)?tests/(preflight/fixtures/gpu|doctor/fixtures)/[A-Za-z0-9_-][A-Za-z0-9._-]*$' ||
    true)"
  [[ -z "$bad" ]] || { log "refusing $tarball: unexpected paths: $bad"; exit 2; }
  # Plain files and folders only: no links, devices or the like.
  bad="$(tar -tvzf "$tarball" | grep -v '^[-d]' || true)"
  [[ -z "$bad" ]] || { log "refusing $tarball: not plain files: $bad"; exit 2; }
  tar -xzf "$tarball" -C "$dest" --no-same-owner
  tar -tzf "$tarball" | grep -v '/$' | sed "s|^\./||; s|^|gpu-check: added $dest/|" >&2
  log "then: cmake --build build --target preflight_unit_tests dlaunch_doctor_test &&"
  log "  (cd build && ctest -R 'NcclFormatTest|RecordedGpu|CapturedOutput' --output-on-failure)"
}

case "${1:-all}" in
  build) build ;;
  bundle) bundle ;;
  run) run ;;
  dryrun) dryrun ;;
  import)
    [[ -n "${2:-}" ]] || { echo "usage: $0 import RESULTS_DIR_OR_TARBALL" >&2; exit 2; }
    import_fixtures "$2"
    ;;
  check-busbw)
    [[ -n "${2:-}" ]] || { echo "usage: $0 check-busbw PREFLIGHT_JSON" >&2; exit 2; }
    check_busbw "$2"
    ;;
  all)
    build
    bundle
    if [[ "$(gpu_count)" -ge 1 ]]; then run; else log "no GPU here: bundle ready, run it on a GPU machine"; fi
    ;;
  *) echo "usage: $0 [build|bundle|run|dryrun|import DIR|all|check-busbw FILE]" >&2; exit 2 ;;
esac
