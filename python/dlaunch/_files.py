"""Files of the run directory as the rank agent writes them (docs/run-directory.md)."""
import json
import os
import tempfile

EVENTS_SCHEMA = "dlaunch.events/1"


def _process_umask():
    """The umask the launcher gave the rank (--run-dir-mode), read without changing it where
    Linux says it (os.umask would set it, for a moment, for every thread of the rank)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


# Files get the bits open(2) with 0644 gives them: 0600 in a private run directory.
_FILE_MODE = 0o644 & ~_process_umask()

def write_atomically(path, text, durable=False):
    """Writes text as docs/run-directory.md says: a temporary file of its own in the same folder
    (tempfile.mkstemp, `<name>.tmp.<unique>`), fsync when `durable`, then rename(2) over the
    target. Readers see the old or the new file, never half of one; no temporary file survives
    a failed write. Evidence that must outlive the machine (error.json, a dump's flight.json)
    is durable; a file rewritten every wake (heartbeat.json, the periodic flight.json) is not:
    an fsync there costs the disk a flush per wake and keeps nothing a crash would not make
    stale anyway."""
    folder, name = os.path.split(path)
    data = text if isinstance(text, bytes) else text.encode()
    # os-level calls, fewer system calls than a Python file object: each lets the GIL go, and
    # the training thread must then hand it back to this one.
    fd, tmp = tempfile.mkstemp(dir=folder or ".", prefix=name + ".tmp.")
    try:
        try:
            os.fchmod(fd, _FILE_MODE)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(path, obj, durable=False):
    write_atomically(path, json.dumps(obj, separators=(",", ":")) + "\n", durable)


class LineLog:
    """events.jsonl: one JSON object per line, each with its schema, each line one write(2) with
    O_APPEND so lines of several writers never interleave."""

    def __init__(self, path):
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)

    def close(self):
        try:
            os.close(self._fd)
        except OSError:
            pass

    def append(self, obj):
        line = {"schema": EVENTS_SCHEMA, **obj}
        try:
            os.write(self._fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())
        except OSError:
            pass
