#!/usr/bin/env bash
# Installs the Debian packages dlaunch builds and tests with (and, with --bench, benchmarks
# with), only those that are missing.
set -euo pipefail

packages=(
  build-essential cmake make pkg-config ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost-program-options-dev nlohmann-json3-dev libsimdjson-dev libgloo-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libtorch-dev zlib1g-dev dataset-fashion-mnist
  libopenmpi-dev openmpi-bin
  gdb iproute2 procps openssl
  slurm-wlm munge
)
# `make bench` also needs the peers it measures against and hyperfine.
[ "${1:-}" = "--bench" ] && packages+=(python3-torch hyperfine)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
