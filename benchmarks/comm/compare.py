"""Medians and spreads of the rounds written by run_comm_bench.sh, as markdown tables.

usage: compare.py OUT_DIR [SYSTEM...]   (systems: shm tcp mpi torch; default: those found)
"""

import glob
import json
import os
import statistics
import sys

NAMES = {"shm": "dlaunch shm", "tcp": "dlaunch tcp", "mpi": "OpenMPI", "torch": "torch gloo"}


def in_place(doc):
    """dlaunch's in-place column: the same operation as MPI_IN_PLACE and torch's all_reduce."""
    return [dict(r["in_place"], size=r["size"]) for r in doc["bandwidth"][0]["rows"]]


def load(out, system):
    runs = []
    for path in sorted(glob.glob(os.path.join(out, f"{system}-*.json"))):
        with open(path) as f:
            doc = json.load(f)
        rows = in_place(doc) if system in ("shm", "tcp") else doc["rows"]
        runs.append({r["size"]: r for r in rows})
    return runs


def values(runs, size, key):
    return [r[size][key] for r in runs if size in r]


def cell(vals, fmt):
    if not vals:
        return "-"
    med = statistics.median(vals)
    if len(vals) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(vals))}-{fmt.format(max(vals))})"


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def main(out, systems):
    runs = {s: load(out, s) for s in systems}
    runs = {s: r for s, r in runs.items() if r}
    memcpy = []
    for path in sorted(glob.glob(os.path.join(out, "memcpy-*.json"))):
        with open(path) as f:
            memcpy.append(json.load(f)["median_gbps"])
    sizes = sorted(set.intersection(*(set(r[0]) for r in runs.values())))
    counts = ", ".join(f"{NAMES[s]} {len(r)}" for s, r in runs.items())
    print(f"rounds: {counts}; cells are the median (min-max) over rounds\n")
    if memcpy:
        print(f"memcpy bandwidth (64 MiB buffers, before and after the rounds): "
              f"{' and '.join(f'{m:.2f}' for m in memcpy)} GB/s\n")

    extra = [("shm", "mpi"), ("shm", "torch"), ("shm", "tcp")]
    extra = [(a, b) for a, b in extra if a in runs and b in runs]
    table(runs, sizes, extra, "Time per allreduce (us)", "time_us", "{:.1f}", "time")
    table(runs, sizes, extra, "Bus bandwidth (GB/s, nccl-tests' busbw = algbw x 2(n-1)/n)",
          "busbw_gbps", "{:.3f}", "busbw")


def paired(runs, a, b, z, key):
    """The ratio a/b of each round (the systems' runs of one round are pairs), as a cell."""
    pairs = [ra[z][key] / rb[z][key] for ra, rb in zip(runs[a], runs[b])
             if z in ra and z in rb and rb[z][key]]
    return cell(pairs, "{:.2f}")


def table(runs, sizes, extra, title, key, fmt, what):
    med = {s: {z: statistics.median(values(r, z, key)) for z in sizes} for s, r in runs.items()}
    print(f"{title}\n")
    head = " | ".join(NAMES[s] for s in runs)
    print(f"| size | {head} | " + " | ".join(f"{a}/{b} {what}" for a, b in extra) + " | " +
          " | ".join(f"{a}/{b} per round" for a, b in extra) + " |")
    print("| ---: |" + " ---: |" * (len(runs) + 2 * len(extra)))
    for z in sizes:
        cells = [cell(values(r, z, key), fmt) for r in runs.values()]
        ratios = [ratio(med[a][z], med[b][z]) for a, b in extra]
        rounds = [paired(runs, a, b, z, key) for a, b in extra]
        print(f"| {human(z)} | " + " | ".join(cells + ratios + rounds) + " |")
    print()


if __name__ == "__main__":
    found = [s for s in NAMES if glob.glob(os.path.join(sys.argv[1], f"{s}-*.json"))]
    main(sys.argv[1], sys.argv[2:] or found)
