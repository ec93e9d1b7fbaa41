"""The rank's flight recorder: a ring of the last collectives and point-to-point calls, in the
flight.json schema that dlaunch's native ranks write (docs/run-directory.md).

flight.json is written now and then; a rank that dies in between (Gloo aborts a rank that
received the wrong size with SIGABRT, inside its own thread, before Python can run again) would
lose its last calls. So each change of an entry is also written at once, before the call enters
the backend, into flight_tail.jsonl: TAIL_SLOTS fixed-size lines, entry `seq` in line
seq % TAIL_SLOTS, rewritten in place through a shared mapping. The page cache keeps what was
written when the process dies; the launcher merges the tail over flight.json."""
import json
import mmap
import os
import threading
import time

SCHEDULED, STARTED, COMPLETED, FAILED = "scheduled", "started", "completed", "failed"
P2P_OPS = ("send", "recv")
TAIL_FILE = "flight_tail.jsonl"
TAIL_SLOTS = 64
TAIL_SLOT_BYTES = 1024
_BLANK_SLOT = b" " * (TAIL_SLOT_BYTES - 1) + b"\n"


_quoted_cache = {}


def _quoted(text):
    """text as a JSON string; call sites and group names repeat every step, so they are kept."""
    q = _quoted_cache.get(text)
    if q is None:
        q = json.dumps(text)
        if len(_quoted_cache) < 4096:
            _quoted_cache[text] = q
    return q


def _shape(shape):
    return "[" + ",".join("%d" % d for d in shape[:8]) + "]"


class Entry:
    __slots__ = ("seq", "collective_seq", "pg", "pg_seq", "op", "dtype", "count", "shape",
                 "bytes", "peer", "root", "state", "scheduled_ns", "started_ns", "completed_ns",
                 "error", "call_site", "bucket", "async_op", "device", "tail_static", "text")

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
        self._tail = None
        self._flying = {}  # seq -> entry still started, oldest first (a heartbeat reads it)
        # Time with at least one call in flight, for the step time less its waits (the launcher's
        # straggler measure): the total of closed spans, and when the open one began (0: none).
        self._comm_ns = 0
        self._comm_since_ns = 0

    def open_tail(self, path):
        """Starts the tail file (emptied: a new rank's entries only), mapped shared, so a write
        is a copy into the page cache that outlives the process. Without it the recorder keeps
        working and only flight.json is written. Its blocks are allocated first: a store into a
        hole of a mapping on a full disk is a SIGBUS, which would kill the rank."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            try:
                os.posix_fallocate(fd, 0, TAIL_SLOTS * TAIL_SLOT_BYTES)
                self._tail = mmap.mmap(fd, TAIL_SLOTS * TAIL_SLOT_BYTES)
            finally:
                os.close(fd)
            self._tail[:] = _BLANK_SLOT * TAIL_SLOTS
        except (OSError, ValueError):
            self._tail = None

    def detach(self):
        """In a forked child: the tail file is the rank's (a shared mapping), so the child's
        calls stay in its own memory; a lock held at the fork by another thread is replaced."""
        self._lock = threading.Lock()
        tail, self._tail = self._tail, None
        if tail is not None:
            tail.close()

    def _write_tail(self, e):
        """Under self._lock: entry e into its slot. The fields fixed at record time are encoded
        once; a change re-formats only state and times (a few microseconds)."""
        if self._tail is None:
            return
        if e.tail_static is None:
            e.tail_static = (
                '"pg":%s,"pg_seq":%d,"op":%s,"dtype":%s,"count":%d,"shape":%s,"bytes":%d,'
                '"peer":%d,"root":%d,"call_site":%s,"async":%s%s' %
                (_quoted(e.pg), e.pg_seq, _quoted(e.op), _quoted(e.dtype), e.count,
                 _shape(e.shape), e.bytes, e.peer, e.root, _quoted(e.call_site[-200:]),
                 "true" if e.async_op else "false",
                 ',"bucket":%d' % e.bucket if e.bucket >= 0 else ""))
        duration_us = 0
        if e.started_ns and e.completed_ns:
            duration_us = (e.completed_ns - e.started_ns) // 1000
        line = ('{"seq":%d,"collective_seq":%d,"state":"%s","scheduled_unix_ns":%d,'
                '"started_unix_ns":%d,"completed_unix_ns":%d,"duration_us":%d,"error":%s,%s}' %
                (e.seq, e.collective_seq, e.state, e.scheduled_ns, e.started_ns, e.completed_ns,
                 duration_us, _quoted(e.error[:200]) if e.error else '""',
                 e.tail_static)).encode()
        if len(line) >= TAIL_SLOT_BYTES:
            line = _BLANK_SLOT
        else:
            line = line + b" " * (TAIL_SLOT_BYTES - 1 - len(line)) + b"\n"
        at = (e.seq % TAIL_SLOTS) * TAIL_SLOT_BYTES
        try:
            self._tail[at:at + TAIL_SLOT_BYTES] = line
        except (ValueError, IndexError):
            pass

    def record(self, op, pg, dtype, count, shape, nbytes, peer=-1, root=-1, call_site="",
               bucket=-1, async_op=False, device="", default_pg=True, scheduled=False):
        """A new entry, started (Python calls enter the backend at once), or only scheduled
        until start(): a functional collective, issued now and waited on at its output's first
        use, is not in flight while its rank runs other Python code."""
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
            e.tail_static = None
            e.text = None
            e.state = SCHEDULED if scheduled else STARTED
            e.scheduled_ns = now
            e.started_ns = 0 if scheduled else now
            e.completed_ns = 0
            e.error = ""
            slot = e.seq % self.capacity
            old = self._ring[slot]
            if old is not None:
                self._flying.pop(old.seq, None)  # an async call never waited on, out of the ring
            self._ring[slot] = e
            if not scheduled:
                self._comm_opens(now)
                self._flying[e.seq] = e
                self.last_started = e.seq
            self.version += 1
            self.last_change_ns = now
            self._write_tail(e)
        return e

    def start(self, e):
        """A scheduled entry's call is now waited on."""
        with self._lock:
            if e.state != SCHEDULED:
                return
            e.state = STARTED
            e.started_ns = time.time_ns()
            self._comm_opens(e.started_ns)
            self._flying[e.seq] = e
            self.last_started = max(self.last_started, e.seq)
            self.version += 1
            self.last_change_ns = e.started_ns
            self._write_tail(e)

    def complete(self, e):
        with self._lock:
            if e.state in (COMPLETED, FAILED):
                return
            e.state = COMPLETED
            e.completed_ns = time.time_ns()
            self._flying.pop(e.seq, None)
            self._comm_closes(e.completed_ns)
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
            self._flying.pop(e.seq, None)
            self._comm_closes(e.completed_ns)
            e.error = error
            e.text = None
            self.version += 1
            self.last_change_ns = e.completed_ns
            self._write_tail(e)

    # ---- the straggler measures (under self._lock)
    def _comm_opens(self, now):
        if not self._flying:
            self._comm_since_ns = now

    def _comm_closes(self, now):
        if not self._flying and self._comm_since_ns:
            self._comm_ns += now - self._comm_since_ns
            self._comm_since_ns = 0

    def comm_ns(self):
        """Nanoseconds so far with a call in flight (spans of overlapping calls counted once)."""
        with self._lock:
            open_ns = time.time_ns() - self._comm_since_ns if self._comm_since_ns else 0
            return self._comm_ns + open_ns

    def arrivals(self, n=256):
        """(collective_seq of the first, [start unix us, ...]) of the newest `n` collectives of
        the default group that started; (-1, []) when none. 0 marks one not started."""
        with self._lock:
            first = max(0, self._next_seq - min(n, self.capacity))
            picked = []
            for s in range(first, self._next_seq):
                e = self._ring[s % self.capacity]
                if e is not None and e.collective_seq >= 0:
                    picked.append((e.collective_seq, e.started_ns // 1000))
        if not picked:
            return -1, []
        base = picked[0][0]
        out = [0] * (picked[-1][0] - base + 1)
        for seq, us in picked:
            out[seq - base] = us
        return base, out

    def entries(self):
        with self._lock:
            first = max(0, self._next_seq - self.capacity)
            return [self._ring[s % self.capacity] for s in range(first, self._next_seq)]

    def in_flight(self):
        """The oldest entry still started, or None."""
        with self._lock:
            return next(iter(self._flying.values()), None)

    def to_text(self, reason):
        """flight.json's text. An entry that has ended never changes again, so its JSON is made
        once: a periodic dump of a full ring costs a join, not 2000 encodings, while it holds the
        GIL the training thread needs."""
        head = self.to_json(reason, entries=False)
        parts = []
        with self._lock:  # an entry is complete, state and times, or not yet
            first = max(0, self._next_seq - self.capacity)
            for seq in range(first, self._next_seq):
                e = self._ring[seq % self.capacity]
                text = e.text
                if text is None:
                    text = json.dumps(e.to_json(), separators=(",", ":"))
                    if e.state in (COMPLETED, FAILED):
                        e.text = text
                parts.append(text)
        return (json.dumps(head, separators=(",", ":"))[:-1] + ',"entries":[' +
                ",".join(parts) + "]}\n")

    def to_json(self, reason, entries=True):
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
            **({"entries": [e.to_json() for e in self.entries()]} if entries else {}),
        }
