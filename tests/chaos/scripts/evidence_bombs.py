#!/usr/bin/env python3
"""Writes hostile PyTorch flight-recorder dumps ("evidence bombs") for dlaunch's pickle reader:

    evidence_bombs.py [--prefix PREFIX] [--mib 60] [--exit 1] KIND...

The i-th KIND goes to PREFIX<i> (a torch_trace_<digits> name). Without --prefix, PREFIX is
$TORCH_NCCL_DEBUG_INFO_TEMP_FILE, which dlaunch sets to rank<R>/torch_trace_: run as a rank, the
script plants the bombs in its own rank folder, then exits with --exit. Standard library only;
nothing here runs code when unpickled (it is plain data, as torch's dumps are), it only costs.

Kinds (each about --mib MiB unless said):
  small_objects  a dump whose "entries" is one list of tiny ints (2 bytes each)
  memo_dicts     one 20-field entry, then memo references to it (each expands to the whole entry)
  laughs         memo references doubling a list 40 times (2^40 values if expanded; a few bytes)
  huge_string    one entry whose profiling_name is a single --mib MiB string
  string_laughs  a 1 MiB string, then entries that each refer to it
  marks          MARK opcodes only
  dups           None, then DUP opcodes
  memo_flood     None, then MEMOIZE opcodes (a memo entry per byte)
  wide_entries   a dump in torch's structure that decodes within bounds but whose entries hold
                 200 tensors of 100 dims, 1 KB names and 100 frames, and 20000 process groups
"""
import argparse
import os
import pickle
import struct
import sys

HEAD = b"\x80\x02"


def s(text):  # BINUNICODE
    data = text.encode() if isinstance(text, str) else text
    return b"X" + struct.pack("<I", len(data)) + data


def dump_dict(entries_body):
    """{"version": "2.4", "entries": [<entries_body>]}: entries_body pushes the list's items."""
    return (HEAD + b"}(" + s("version") + s("2.4") + s("entries") + b"](" + entries_body +
            b"eu.")


def entry_fields(seq):
    fields = [("record_id", seq), ("pg_id", 0), ("collective_seq_id", seq), ("p2p_seq_id", 0),
              ("op_id", seq), ("time_created_ns", 1), ("timeout_ms", 600000),
              ("time_discovered_started_ns", 2), ("time_discovered_completed_ns", 3)]
    out = b""
    for key, value in fields:
        out += s(key) + b"J" + struct.pack("<i", value)
    for key, value in [("profiling_name", "nccl:all_reduce"), ("state", "started"),
                       ("input_dtypes", None), ("output_dtypes", None), ("input_sizes", None),
                       ("output_sizes", None), ("frames", None), ("is_p2p", None),
                       ("retired", None), ("process_group", None), ("duration_ms", None)]:
        out += s(key) + (s(value) if value else b"N")
    return out  # 20 key/value pairs


def bomb(kind, size):
    if kind == "small_objects":
        return dump_dict(b"K\x01" * (size // 2))
    if kind == "memo_dicts":
        first = b"}q\x05(" + entry_fields(0) + b"u"
        return dump_dict(first + b"h\x05" * (size // 2))
    if kind == "laughs":
        body = b"]q\x000"
        for i in range(40):
            body += b"h" + bytes([i]) + b"h" + bytes([i]) + b"\x86q" + bytes([i + 1]) + b"0"
        return (HEAD + b"}(" + s("version") + s("2.4") + s("entries") + body + b"h" +
                bytes([40]) + b"u.")
    if kind == "huge_string":
        return dump_dict(b"}(" + s("profiling_name") + s(b"n" * size) + s("state") +
                         s("started") + b"u")
    if kind == "string_laughs":
        first = b"}(" + s("profiling_name") + s(b"s" * (1 << 20)) + b"q\x06u"
        return dump_dict(first + (b"}(" + s("profiling_name") + b"h\x06u") * (size // 32))
    if kind == "marks":
        return HEAD + b"(" * size
    if kind == "dups":
        return HEAD + b"N" + b"2" * size
    if kind == "memo_flood":
        return b"\x80\x04N" + b"\x94" * size
    if kind == "wide_entries":
        sizes = [[7] * 100 for _ in range(200)]
        dtypes = ["Float" + "x" * 1000] * 200
        frames = [{"name": "f" * 1000, "filename": "/work/" + "d" * 1000, "line": 1}] * 100
        entries = [{"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"),
                    "collective_seq_id": i, "profiling_name": "nccl:all_reduce" + "p" * 1000,
                    "state": "started", "input_sizes": sizes, "output_sizes": sizes,
                    "input_dtypes": dtypes, "output_dtypes": dtypes, "frames": frames,
                    "timeout_ms": 600000} for i in range(40)]
        groups = {str(g): {"name": str(g), "desc": "d" * 1000, "ranks": str(list(range(64)))}
                  for g in range(20000)}
        return pickle.dumps({"version": "2.4", "pg_config": groups, "entries": entries},
                            protocol=2)
    raise SystemExit("unknown kind " + kind)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prefix", default=os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", ""))
    p.add_argument("--mib", type=int, default=60)
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("kinds", nargs="*")
    args = p.parse_args()
    if not args.prefix:
        raise SystemExit("no --prefix and no TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    for i, kind in enumerate(args.kinds):
        with open(args.prefix + str(i), "wb") as f:
            f.write(bomb(kind, args.mib << 20))
    sys.exit(args.exit)


if __name__ == "__main__":
    main()
