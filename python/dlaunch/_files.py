"""Files of the run directory as the rank agent writes them (docs/run-directory.md)."""
import json
import os
import threading

_counter = 0
_counter_lock = threading.Lock()


def write_atomically(path, text):
    """Writes text through a temp file unique to this call and rename(2): readers see the old or
    the new file, never half of one; no temp file survives a failed write."""
    global _counter
    with _counter_lock:
        _counter += 1
        n = _counter
    tmp = "%s.tmp.%d.%d.%d" % (path, os.getpid(), threading.get_ident() % 100000, n)
    data = text if isinstance(text, bytes) else text.encode()
    try:
        # os-level calls, fewer system calls than a Python file object: each lets the GIL go, and
        # the training thread must then hand it back to this one.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(path, obj):
    write_atomically(path, json.dumps(obj, separators=(",", ":")) + "\n")


class LineLog:
    """events.jsonl: one JSON object per line, each line one write(2) with O_APPEND so lines of
    several writers never interleave."""

    def __init__(self, path):
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)

    def close(self):
        try:
            os.close(self._fd)
        except OSError:
            pass

    def append(self, obj):
        try:
            os.write(self._fd, (json.dumps(obj, separators=(",", ":")) + "\n").encode())
        except OSError:
            pass
