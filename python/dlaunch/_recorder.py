"""The rank's flight recorder: a ring of the last collectives and point-to-point calls, in the
flight.json schema that dlaunch's native ranks write (docs/run-directory.md).

flight.json is written now and then; a rank that dies in between (Gloo aborts a rank that
received the wrong size with SIGABRT, inside its own thread, before Python can run again) would
lose its last calls. So each change of an entry is also written at once, before the call enters
the backend, into flight_tail.jsonl: TAIL_SLOTS fixed-size lines, entry `seq` in line
seq % TAIL_SLOTS, rewritten in place with pwrite(2). The page cache keeps what was written when
the process dies; the launcher merges the tail over flight.json."""
import json
import os
import threading
import time

SCHEDULED, STARTED, COMPLETED, FAILED = "scheduled", "started", "completed", "failed"
P2P_OPS = ("send", "recv")
TAIL_FILE = "flight_tail.jsonl"
TAIL_SLOTS = 64
TAIL_SLOT_BYTES = 1024
_BLANK_SLOT = b" " * (TAIL_SLOT_BYTES - 1) + b"\n"


class Entry:
    __slots__ = ("seq", "collective_seq", "pg", "pg_seq", "op", "dtype", "count", "shape",
                 "bytes", "peer", "root", "state", "scheduled_ns", "started_ns", "completed_ns",
                 "error", "call_site", "bucket", "async_op", "device")

    def to_json(self):
        duration_us = 0
        if self.started_ns and self.completed_ns:
            duration_us = (self.completed_ns - self.started_ns) // 1000
        out = {
            "seq": self.seq, "collective_seq": self.collective_seq, "pg": self.pg,
            "pg_seq": self.pg_seq, "op": self.op, "dtype": self.dtype, "count": self.count,
            "shape": self.shape, "bytes": self.bytes, "peer": self.peer, "root": self.root,
            "state": self.state, "scheduled_unix_ns": self.scheduled_ns,
            "started_unix_ns": self.started_ns, "completed_unix_ns": self.completed_ns,
            "duration_us": duration_us, "error": self.error, "call_site": self.call_site,
            "async": self.async_op,
        }
        if self.bucket >= 0:
            out["bucket"] = self.bucket
        if self.device:
            out["device"] = self.device
        return out


class FlightRecorder:
    """Thread-safe: collectives start on the main thread and complete on backend threads."""

    def __init__(self, rank, world_size, capacity=2000):
        self.rank = rank
        self.world_size = world_size
        self.capacity = max(1, capacity)
        self.backend = ""
        self.process_groups = {}  # name -> {"ranks": [...], "backend": ...}
        self._ring = [None] * self.capacity
        self._lock = threading.Lock()
        self._next_seq = 0
        self._next_collective = 0
        self._pg_seq = {}
        self.last_started = -1
        self.last_completed = -1
        self.version = 0  # bumped on every change: the periodic dump skips an unchanged ring
        self.last_change_ns = 0
        self._tail_fd = -1

    def open_tail(self, path):
        """Starts the tail file (emptied: a new rank's entries only). Without it the recorder
        keeps working and only flight.json is written."""
        try:
            self._tail_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
                                    0o644)
        except OSError:
            self._tail_fd = -1

    def _write_tail(self, e):
        """Under self._lock: entry e into its slot, one pwrite."""
        if self._tail_fd < 0:
            return
        doc = e.to_json()
        line = json.dumps(doc, separators=(",", ":")).encode()
        if len(line) >= TAIL_SLOT_BYTES:  # long call sites and shapes are cut, never the slot
            doc["call_site"] = doc["call_site"][-200:]
            doc["shape"] = doc["shape"][:8]
            doc["error"] = doc["error"][:200]
            line = json.dumps(doc, separators=(",", ":")).encode()
        if len(line) >= TAIL_SLOT_BYTES:
            line = _BLANK_SLOT
        else:
            line = line + b" " * (TAIL_SLOT_BYTES - 1 - len(line)) + b"\n"
        try:
            os.pwrite(self._tail_fd, line, (e.seq % TAIL_SLOTS) * TAIL_SLOT_BYTES)
        except OSError:
            pass

    def record(self, op, pg, dtype, count, shape, nbytes, peer=-1, root=-1, call_site="",
               bucket=-1, async_op=False, device="", default_pg=True):
        now = time.time_ns()
        e = Entry()
        with self._lock:
            e.seq = self._next_seq
            self._next_seq += 1
            if op in P2P_OPS or not default_pg:
                e.collective_seq = -1
            else:
                e.collective_seq = self._next_collective
                self._next_collective += 1
            e.pg = pg
            e.pg_seq = self._pg_seq.get(pg, 0)
            self._pg_seq[pg] = e.pg_seq + 1
            e.op, e.dtype, e.count, e.shape, e.bytes = op, dtype, count, shape, nbytes
            e.peer, e.root, e.call_site, e.bucket = peer, root, call_site, bucket
            e.async_op, e.device = async_op, device
            e.state = STARTED  # Python calls enter the backend at once
            e.scheduled_ns = e.started_ns = now
            e.completed_ns = 0
            e.error = ""
            self._ring[e.seq % self.capacity] = e
            self.last_started = e.seq
            self.version += 1
            self.last_change_ns = now
            self._write_tail(e)
        return e

    def complete(self, e):
        with self._lock:
            if e.state in (COMPLETED, FAILED):
                return
            e.state = COMPLETED
            e.completed_ns = time.time_ns()
            if e.seq > self.last_completed:
                self.last_completed = e.seq
            self.version += 1
            self.last_change_ns = e.completed_ns
            self._write_tail(e)

    def fail(self, e, error):
        with self._lock:
            if e.state == FAILED:
                return
            e.state = FAILED
            e.completed_ns = time.time_ns()
            e.error = error
            self.version += 1
            self.last_change_ns = e.completed_ns
            self._write_tail(e)

    def entries(self):
        with self._lock:
            first = max(0, self._next_seq - self.capacity)
            return [self._ring[s % self.capacity] for s in range(first, self._next_seq)]

    def in_flight(self):
        """The oldest entry still started, or None."""
        for e in self.entries():
            if e.state == STARTED:
                return e
        return None

    def to_json(self, reason):
        entries = [e.to_json() for e in self.entries()]
        return {
            "schema": "dlaunch.flight/1",
            "rank": self.rank,
            "world_size": self.world_size,
            "backend": self.backend,
            "reason": reason,
            "dumped_unix_ms": time.time_ns() // 1000000,
            "capacity": self.capacity,
            "source": "python",
            "pid": os.getpid(),
            "process_groups": self.process_groups,
            "entries": entries,
        }
