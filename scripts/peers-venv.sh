#!/usr/bin/env bash
# Makes the virtual environment of the launchers benchmarks/peers/ compares dlaunch with:
# torchrun 2.15, nvidia-resiliency-ext 0.7's ft_launcher and DeepSpeed 0.19's `deepspeed`.
# The torch 2.15 venv of scripts/torch2-venv.sh (same pins, CPython 3.11, never a system Python),
# then benchmarks/peers/requirements.txt on top, --no-deps --require-hashes.
#
#   scripts/peers-venv.sh [VENV]     default: .venv-peers in the repository
#
# Idempotent (a stamp per requirements file); downloads only here. Exit 0 and the venv, or exit 1
# and one line saying why, the torch layer kept.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$(realpath -m "${1:-.venv-peers}")"
req=benchmarks/peers/requirements.txt
stamp="$venv/.dlaunch-peers.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
py="$venv/bin/python"

scripts/torch2-venv.sh "$venv"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "peers-venv: $venv is up to date"
  exit 0
fi
rm -f "$stamp"
log="$(mktemp)"
rest="$(mktemp)"
trap 'rm -f "$log" "$rest"' EXIT
pip_install() {  # what, pip arguments...
  local what=$1
  shift
  if ! nice -n 10 "$py" -m pip install --quiet --disable-pip-version-check --no-deps \
    --require-hashes "$@" 2>"$log"; then
    echo "peers-venv: pip could not install $what: $(grep -m1 -E 'ERROR|error' "$log" || tail -1 "$log")" >&2
    exit 1
  fi
}
# Everything but nvidia-resiliency-ext, as wheels, DeepSpeed's sdist built against the venv's torch.
grep -v '^nvidia-resiliency-ext==' "$req" >"$rest"
pip_install "$req" --no-build-isolation -r "$rest"
# nvidia-resiliency-ext 0.7.0 has cp312/cp314 manylinux_2_39 wheels only (see $req): installed
# under the wheel's own tags into a folder of its own that a .pth file puts on sys.path.
grep '^nvidia-resiliency-ext==' "$req" >"$rest"
pip_install nvidia-resiliency-ext --upgrade --target "$venv/nvrx" --only-binary=:all: \
  --implementation cp --python-version 3.12 --platform manylinux_2_39_x86_64 -r "$rest"
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$venv/nvrx" >"$site/nvidia_resiliency_ext.pth"
ln -sf ../nvrx/bin/ft_launcher "$venv/bin/ft_launcher"
# Each launcher must at least start on this machine.
for tool in torchrun ft_launcher deepspeed; do
  if ! "$venv/bin/$tool" --help >/dev/null 2>"$log"; then
    echo "peers-venv: $tool does not start: $(tail -1 "$log")" >&2
    exit 1
  fi
done
echo "$want" >"$stamp"
versions='import importlib.metadata as m
print(", ".join(p + " " + m.version(p) for p in ("torch", "nvidia-resiliency-ext", "deepspeed")))'
echo "peers-venv: made $venv ($("$py" -c "$versions"))"
