"""torch's own flight recorder on Gloo (torch 2.8+): torch records Gloo's collectives in the ring
it keeps for NCCL, but only NCCL's watchdog writes it out. So the agent writes it where torch
would, TORCH_FR_DUMP_TEMP_FILE (or the older TORCH_NCCL_DEBUG_INFO_TEMP_FILE) plus the global
rank, whenever it dumps its own recorder: the launcher points that prefix at
rank<R>/torch_trace_, and diagnosis reads the file as evidence beside flight.json."""
import os
import sys

from . import _files


def dump(rank, backend):
    """Writes torch's pickled ring for a Gloo job; does nothing without torch's recorder (torch
    older than 2.8, or no buffer size set) or on NCCL, whose watchdog dumps it. Blocks for the
    pickling, well under 1 ms for a few hundred entries."""
    if backend != "gloo":
        return
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get(
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    size = os.environ.get("TORCH_FR_BUFFER_SIZE") or os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE")
    c10d = sys.modules.get("torch._C._distributed_c10d")
    if not prefix or not size or size == "0" or c10d is None:
        return
    fn = getattr(c10d, "_dump_fr_trace", None)
    if fn is None:
        return
    try:
        # Without stack traces: torch symbolizes them on the first dump, ~8 s of the agent's
        # thread here, past the launcher's grace period; the agent's own records have the
        # call sites.
        try:
            data = fn(includeStackTraces=False)
        except TypeError:
            data = fn()
        if data:
            _files.write_atomically("%s%d" % (prefix, rank), bytes(data), durable=True)
    except Exception as e:
        print("dlaunch: torch's flight recorder was not written: %s: %s" % (type(e).__name__, e),
              file=sys.stderr)
