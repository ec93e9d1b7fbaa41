#!/usr/bin/env bash
# Makes the torch 2.x virtual environment the Python agent's tests run on besides Debian's
# torch 1.13 (/usr/bin/python3): CPython 3.11 (the first python3.11 on PATH), the packages and
# hashes of python/torch2-requirements.txt, nothing else. Never touches a system Python.
#
#   scripts/torch2-venv.sh [VENV]     default: .venv-torch2 in the repository
#
# Idempotent: a venv whose stamp matches the requirements file is left as it is. Downloads only
# here (pip's cache is used); the tests never download. Exit 0 and the venv; exit 3 and one line
# when the package index cannot be reached (CI then skips the torch 2.x tier); exit 1 and one
# line for any other failure (no python3.11, an install that failed), the old venv kept.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$(realpath -m "${1:-.venv-torch2}")"
req=python/torch2-requirements.txt
stamp="$venv/.dlaunch-requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"

if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "torch2-venv: $venv is up to date ($("$venv/bin/python" -c 'import torch; print(torch.__version__)'))"
  exit 0
fi

py="$(command -v python3.11 || true)"
if [[ -z "$py" ]]; then
  echo "torch2-venv: no python3.11 on PATH (the pinned wheels are cp311)" >&2
  exit 1
fi

# Built beside the final place and moved in when complete: an interrupted install never leaves
# a venv the tests would take for a good one.
tmp="$venv.tmp.$$"
trap 'rm -rf "$tmp" "$tmp.probe"' EXIT
rm -rf "$tmp"
# Whether the index answers at all: the smallest pinned wheel, fetched alone.
probe="$(grep -m1 -E '^filelock==' "$req" | cut -d' ' -f1)"
if ! "$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  -d "$tmp.probe" "$probe" >/dev/null 2>&1; then
  echo "torch2-venv: the package index cannot be reached (pip download $probe failed)" >&2
  exit 3
fi
"$py" -m venv "$tmp"
if ! nice -n 10 "$tmp/bin/python" -m pip install --quiet --disable-pip-version-check \
  --no-deps --require-hashes --only-binary=:all: -r "$req" 2>"$tmp.log"; then
  echo "torch2-venv: pip could not install $req: $(grep -m1 -E 'ERROR|error' "$tmp.log" || tail -1 "$tmp.log")" >&2
  rm -f "$tmp.log"
  exit 1
fi
rm -f "$tmp.log"
# torch must import and run a Gloo collective on this machine's CPU, or the venv is no good.
"$tmp/bin/python" - <<'EOF'
import os, tempfile
import torch, torch.distributed as dist
store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
dist.init_process_group("gloo", store=store, rank=0, world_size=1)
t = torch.ones(4)
dist.all_reduce(t)
assert float(t.sum()) == 4.0
dist.destroy_process_group()
EOF
# A venv's entry-point scripts name its path: point them at the final one after the move.
rm -rf "$venv"
mv "$tmp" "$venv"
trap - EXIT
sed -i "s#$tmp#$venv#g" "$venv"/bin/* "$venv/pyvenv.cfg" 2>/dev/null || true
echo "$want" >"$stamp"
echo "torch2-venv: made $venv ($("$venv/bin/python" -c 'import torch; print(torch.__version__)'))"
