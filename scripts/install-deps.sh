#!/usr/bin/env bash
# Installs the Debian packages dlaunch builds with, only those that are missing. --test adds what
# the test suite drives for real (headless Chromium for the report page, Debian's torch 1.13 for
# the Python rank agent's tests, Prometheus' server and promtool for /metrics); --bench adds the
# peers the benchmarks measure against and hyperfine. apt's own output goes to a log file; the
# console gets one line per step (and the log's tail when a step fails).
set -euo pipefail

packages=(
  build-essential cmake make pkg-config ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost-program-options-dev nlohmann-json3-dev libsimdjson-dev libgloo-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libtorch-dev zlib1g-dev dataset-fashion-mnist
  libopenmpi-dev openmpi-bin
  gdb elfutils iproute2 procps openssl
  slurm-wlm munge
)
for flag in "$@"; do
  case "$flag" in
    --test) packages+=(chromium python3-torch prometheus) ;;
    --bench) packages+=(chromium python3-torch hyperfine) ;;
    *) echo "install-deps: unknown flag '$flag' (--test, --bench)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp -t dlaunch-apt.XXXXXX.log)
step() {
  local what=$1
  shift
  local start=$SECONDS
  if ! "$@" >>"$log" 2>&1; then
    echo "install-deps: $what failed; the last lines of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  echo "install-deps: $what ($((SECONDS - start)) s)"
}
echo "install-deps: ${#missing[@]} packages missing: ${missing[*]} (apt's log: $log)"
step "package lists updated" $sudo apt-get update -qq
step "${#missing[@]} packages installed" \
  $sudo apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 "${missing[@]}"
