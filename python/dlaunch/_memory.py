"""Memory figures of the rank (host RSS; on CUDA torch's allocator) and out-of-memory reports
with advice that fits the figures."""
import os
import re
import resource
import sys

_PAGE = os.sysconf("SC_PAGE_SIZE")
GIB = 1 << 30


_statm = {}  # pid -> descriptor of /proc/self/statm, read once per heartbeat


def rss_bytes():
    try:
        fd = _statm.get(os.getpid())
        if fd is None:
            _statm.clear()  # a forked child's copy names its parent's file
            fd = _statm[os.getpid()] = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        return int(os.pread(fd, 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return -1


def peak_rss_bytes():
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def host_memory():
    """(total, available) bytes from /proc/meminfo; -1 when unknown."""
    total = available = -1
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) * 1024
                elif line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return total, available


class Device:
    """The CUDA device the rank works on, once torch has initialised CUDA (never initialised
    here: a CPU job stays a CPU job)."""
    index = None


def cuda_stats():
    """torch.cuda's allocator figures of the rank's device, or {} when CUDA is not in use."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    try:
        cuda = torch.cuda
        if not cuda.is_initialized():
            return {}
        dev = Device.index if Device.index is not None else cuda.current_device()
        out = {
            "device_allocated_bytes": int(cuda.memory_allocated(dev)),
            "device_reserved_bytes": int(cuda.memory_reserved(dev)),
            "device_peak_bytes": int(cuda.max_memory_allocated(dev)),
        }
        try:
            free, total = cuda.mem_get_info(dev)
            out["device_free_bytes"] = int(free)
            out["device_total_bytes"] = int(total)
        except Exception:
            pass
        return out
    except Exception:
        return {}


def fmt(n):
    if n is None or n < 0:
        return "?"
    for unit, size in (("TiB", 1 << 40), ("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return "%.2f %s" % (n / size, unit)
    return "%d B" % n


_UNITS = {"b": 1, "bytes": 1, "kib": 1 << 10, "kb": 1 << 10, "mib": 1 << 20, "mb": 1 << 20,
          "gib": GIB, "gb": GIB, "tib": 1 << 40, "tb": 1 << 40}


def classify_oom(exc):
    """("cuda" | "host", requested bytes or -1) when exc is an out-of-memory error, else None."""
    torch = sys.modules.get("torch")
    oom_type = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None) if torch else None
    text = str(exc)
    if oom_type is not None and isinstance(exc, oom_type):
        kind = "cuda"
    elif isinstance(exc, MemoryError):
        kind = "host"
    elif isinstance(exc, RuntimeError) and ("out of memory" in text or
                                            "can't allocate memory" in text or
                                            "Cannot allocate memory" in text):
        kind = "cuda" if "CUDA" in text or "cuda" in text else "host"
    else:
        return None
    requested = -1
    m = re.search(r"you tried to allocate (\d+) bytes", text)
    if m:
        requested = int(m.group(1))
    else:
        m = re.search(r"Tried to allocate ([0-9.]+) ?([KMGT]?i?B|bytes)", text)
        if m:
            requested = int(float(m.group(1)) * _UNITS.get(m.group(2).lower(), 1))
    return kind, requested


def oom_report(exc, kind, requested):
    """The memory figures and the advice that fits them, for error.json."""
    figures = {"rss_bytes": rss_bytes(), "peak_rss_bytes": peak_rss_bytes()}
    total, available = host_memory()
    figures["host_total_bytes"] = total
    figures["host_available_bytes"] = available
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        figures["address_space_limit_bytes"] = soft
    figures.update(cuda_stats())
    advice = []
    if kind == "cuda":
        alloc = figures.get("device_allocated_bytes", -1)
        reserved = figures.get("device_reserved_bytes", -1)
        dev_total = figures.get("device_total_bytes", -1)
        if requested > 0 and dev_total > 0 and requested > dev_total:
            advice.append("one allocation of %s is larger than the whole device (%s): no allocator "
                          "setting helps; shrink that tensor (batch, sequence length) or shard "
                          "it across ranks" % (fmt(requested), fmt(dev_total)))
        if alloc >= 0 and reserved > 0 and reserved - alloc > max(GIB // 4, reserved // 4):
            advice.append("reserved %s is far above allocated %s: the cache is fragmented; set "
                          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (torch >= 2.1; "
                          "max_split_size_mb:128 before that)" % (fmt(reserved), fmt(alloc)))
            advice.append("torch.cuda.empty_cache() hands cached blocks back to the driver (other "
                          "processes can use them) but frees nothing still referenced, so it "
                          "does not lower allocated memory")
        advice.append("use a smaller per-rank batch with gradient accumulation to keep the "
                      "effective batch (loss / k, optimizer.step() every k micro-batches)")
        advice.append("mixed precision (torch.autocast with bfloat16 or float16) roughly halves "
                      "activation memory")
        advice.append("activation checkpointing (torch.utils.checkpoint) recomputes activations "
                      "in backward instead of keeping them")
    else:
        limit = figures.get("address_space_limit_bytes")
        if limit is not None and (requested < 0 or requested + max(rss_bytes(), 0) > limit):
            advice.append("the address-space limit (ulimit -v) is %s: raise it or lift it "
                          "(ulimit -v unlimited)" % fmt(limit))
        if requested > 0 and total > 0 and requested > total:
            advice.append("one allocation of %s is larger than this host's memory (%s): shrink "
                          "that tensor or shard it across ranks" % (fmt(requested), fmt(total)))
        advice.append("host memory: %s available of %s; every rank on the node holds its own "
                      "copy of the model and of its data loader's buffers" % (fmt(available),
                                                                               fmt(total)))
        advice.append("use a smaller per-rank batch with gradient accumulation, fewer DataLoader "
                      "workers, or fewer ranks per node")
    return figures, advice
