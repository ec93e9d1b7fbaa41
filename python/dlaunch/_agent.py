"""dlaunch's rank agent: one per Python rank, started by sitecustomize.

It keeps the flight recorder, and talks to the launcher through files of the rank directory
(docs/run-directory.md, "Python ranks"): heartbeat.json every 200 ms at most, flight.json
periodically and on request, exit and signals, py_stacks.txt on request, telemetry lines in
events.jsonl, error.json when the rank dies of an exception. The launcher asks for a dump by
replacing dump_request; the agent's thread looks for it every 200 ms. A heartbeat that cannot be
written (a full disk, an immutable folder) goes through the launcher's pipe (DLAUNCH_AGENT_FD)
instead, with the reason: the rank's liveness never depends on the disk. The first heartbeat goes
down the pipe too: that is how the launcher learns that the rank runs the agent.

Just over 600 lines: one Agent holds the state that its thread, the signal and exit handlers and
the hooks all share; the dump writers are the part that could move to a module of their own.

A child the rank forks (os.fork, multiprocessing's fork) inherits the agent with the rank's memory
but is not the rank: from the fork on, the child's agent writes nothing (detach), so that the
rank's error.json, heartbeat and flight recorder stay the rank's own.
"""
import atexit
import json
import os
import signal
import stat
import sys
import threading
import time
import traceback

from . import _files, _memory, _torch_fr, _workers
from ._recorder import FlightRecorder

HEARTBEAT_FILE = "heartbeat.json"
FLIGHT_FILE = "flight.json"
STACKS_FILE = "py_stacks.txt"
ERROR_FILE = "error.json"
EVENTS_FILE = "events.jsonl"
DUMP_REQUEST_FILE = "dump_request"

# The agent's thread wakes once per _POLL_S: it needs the GIL then, which a training loop in
# Python or in torch's ops holds, so every wake (and every system call in it, which lets the GIL
# go) costs the training thread a hand-over. The launcher counts a collective stall only once
# every rank has sent a heartbeat since the stall first held (an older one may miss a peer that
# has just entered the call), so the heartbeat period is also what a hang waits past
# --hang-timeout: a heartbeat on every wake, whatever DLAUNCH_HEARTBEAT_MS (the native ranks'
# period) says; a dump request is answered within one wake.
_POLL_S = 0.2
_FLIGHT_EVERY_S = 2.0
# A pipe write of at most this many bytes is never torn by another writer's (POSIX PIPE_BUF).
_PIPE_BUF = 4096

_agent = None


def current():
    return _agent


def start_from_env():
    """Starts the agent when this process is a dlaunch rank and no ancestor in the rank runs
    one already. Returns it, or None."""
    global _agent
    if _agent is not None:
        return _agent
    owner = os.environ.get("DLAUNCH_PYTHON_AGENT_PID")
    if owner and owner != str(os.getpid()):
        return None  # a child of the rank (DataLoader worker, subprocess)
    os.environ["DLAUNCH_PYTHON_AGENT_PID"] = str(os.getpid())
    _agent = Agent(os.environ["DLAUNCH_RANK_DIR"])
    os.register_at_fork(before=_workers.before_fork, after_in_child=_after_fork_in_child)
    _agent.start()
    return _agent


def _after_fork_in_child():
    global _agent
    agent, _agent = _agent, None
    if agent is not None:
        agent.detach()
        _workers.in_child()


def _agent_pipe():
    """The write end of the launcher's pipe (DLAUNCH_AGENT_FD), non-blocking and not passed on
    to the rank's own subprocesses; None without one."""
    try:
        fd = int(os.environ.get("DLAUNCH_AGENT_FD", ""))
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
        os.set_blocking(fd, False)
        os.set_inheritable(fd, False)
        return fd
    except (ValueError, OSError):
        return None


def _request_stamp(path):
    try:
        st = os.stat(path)
        return (st.st_ino, st.st_mtime_ns, st.st_size)
    except OSError:
        return None


class Agent:
    def __init__(self, rank_dir):
        self.rank_dir = rank_dir
        self.rank = int(os.environ.get("RANK", "0") or 0)
        world = int(os.environ.get("WORLD_SIZE", "0") or 0)
        self.recorder = FlightRecorder(self.rank, world)
        self.heartbeat_s = _POLL_S
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self.phase = "init"
        self.phase_since_ms = int(time.time() * 1000)
        self.step = 0
        self.explicit_steps = False
        self._opt_steps = {}
        # Step timing for the launcher's straggler detection: steps timed, their busy time (the
        # step less its time in collectives), and the last step boundary (monotonic ns and the
        # recorder's comm time then); boundaries come from optimizer steps, else DDP forwards.
        self.steps_timed = 0
        self.step_busy_ms = 0.0
        self._boundary = None
        self._stepped_optimizer = None  # id of the optimizer whose steps are the boundaries
        self.progress_ms = self.phase_since_ms
        self.sections = []  # stack of {"name", "timeout_s", "since_unix_ms"}
        self._in_collective = {}  # thread id -> phase before the collective
        self._flight_version = -1
        self._flight_written = 0.0
        self._telemetry_key = None
        self._telemetry_written = 0.0
        self._request_stamp = None
        self._stopping = threading.Event()
        self._dumped_for_exit = False
        self._error_written = False
        self._prev_sigterm = None
        self._wakeup_r = self._wakeup_w = None
        self._detached = False  # in a forked child: writes nothing of the rank's
        self._pipe = _agent_pipe()
        self.events = None
        self.hooks = None
        # One dump at a time: a signal's dump, then the kill, never while another thread is
        # half-way through a temp file (which the kill would leave behind).
        self._dump_lock = threading.RLock()
        self._exit_reason = "exit"

    # ---- start and stop
    def start(self):
        try:
            os.makedirs(self.rank_dir, exist_ok=True)
            self.events = _files.LineLog(os.path.join(self.rank_dir, EVENTS_FILE))
        except OSError:
            self.events = None
        from . import _recorder, _torch_hooks

        self.recorder.open_tail(self._path(_recorder.TAIL_FILE))
        self.hooks = _torch_hooks.install(self)
        self._request_stamp = _request_stamp(self._path(DUMP_REQUEST_FILE))
        self._install_exit_handlers()
        # The launcher learns that this rank runs the agent from the rank itself, whatever
        # command line started the interpreter: the first heartbeat also goes down the pipe.
        self._write_heartbeat(announce=True)
        t = threading.Thread(target=self._loop, name="dlaunch-agent", daemon=True)
        t.start()

    def _path(self, name):
        return os.path.join(self.rank_dir, name)

    def detach(self):
        """In a child forked from the rank (at-fork hook, the child's only thread): every file of
        the rank stays the rank's. The child's exceptions and exit go unrecorded, and a signal to
        the child no longer reaches the rank's agent thread through the shared wakeup pipe."""
        self._detached = True
        self._stopping.set()
        # A lock another thread held at the fork stays held in the child.
        self._lock = threading.Lock()
        self._dump_lock = threading.RLock()
        self.recorder.detach()
        events, self.events = self.events, None
        if events is not None:
            events.close()
        # The launcher's heartbeat pipe is the rank's too (a fork inherits every fd).
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            try:
                os.close(pipe)
            except OSError:
                pass
        if self._wakeup_r is not None:
            try:
                prev = signal.set_wakeup_fd(-1)
                if prev != self._wakeup_w:
                    signal.set_wakeup_fd(prev)
            except (ValueError, OSError):
                pass
            for fd in (self._wakeup_r, self._wakeup_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._wakeup_r = self._wakeup_w = None

    def _install_exit_handlers(self):
        atexit.register(self._at_exit)
        prev_hook = sys.excepthook

        def excepthook(exc_type, exc, tb):
            if isinstance(exc, KeyboardInterrupt):
                self._exit_reason = "signal"  # SIGINT ended the script: flight.json says so
            self.record_exception(exc, tb)
            prev_hook(exc_type, exc, tb)

        sys.excepthook = excepthook
        prev_thread_hook = threading.excepthook

        def thread_excepthook(args):
            if args.exc_value is not None:
                classified = _memory.classify_oom(args.exc_value)
                if classified is not None:
                    self.record_exception(args.exc_value, args.exc_traceback)
            prev_thread_hook(args)

        threading.excepthook = thread_excepthook
        if threading.current_thread() is not threading.main_thread():
            return
        # SIGTERM (teardown) and SIGINT: dump first, then end as the signal would have. The
        # Python handler runs only when the main thread gets back to Python; a rank stuck in a
        # collective is answered by the agent's thread, woken through the wakeup fd.
        try:
            r, w = os.pipe()
            os.set_blocking(w, False)
            prev_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            if prev_fd != -1:
                signal.set_wakeup_fd(prev_fd)  # someone else's (asyncio): leave it
                os.close(r)
                os.close(w)
            else:
                self._wakeup_r, self._wakeup_w = r, w
        except (ValueError, OSError):
            pass
        try:
            self._prev_sigterm = signal.getsignal(signal.SIGTERM)
            if self._prev_sigterm in (signal.SIG_DFL, None):
                signal.signal(signal.SIGTERM, self._on_sigterm)
        except (ValueError, OSError):
            pass
        # SIGUSR1 (whose default action kills): a dump of this rank, and the rank goes on. A
        # script that installs its own handler replaces this one and keeps its meaning.
        try:
            if signal.getsignal(signal.SIGUSR1) in (signal.SIG_DFL, None):
                signal.signal(signal.SIGUSR1, self._on_sigusr1)
                _workers.agent_sigusr1 = self._on_sigusr1
        except (ValueError, OSError, AttributeError):
            pass

    def _on_sigterm(self, signum, frame):
        self._die_of(signum)

    def _on_sigusr1(self, signum, frame):
        # With the wakeup fd the agent's thread answers at once (the main thread may be inside a
        # collective, where no Python handler runs); this handler then has nothing left to do.
        if self._wakeup_r is None:
            self.dump_on_request("SIGUSR1")

    def dump_on_request(self, trigger):
        """This rank's flight.json and py_stacks.txt now, then a dump request for the launcher
        (<run-dir>/dumps/<name>/request.json), which adds the native stacks and the diagnosis."""
        if self._detached:
            return
        self.dump(trigger, stacks=True)
        now = int(time.time() * 1000)
        name = "%s.%03dZ-rank%d" % (time.strftime("%Y%m%dT%H%M%S", time.gmtime(now / 1000.0)),
                                    now % 1000, self.rank)
        dumps = os.path.join(os.path.dirname(os.path.abspath(self.rank_dir)), "dumps")
        try:
            folder = os.path.join(dumps, name)
            os.makedirs(folder, exist_ok=True)
            _files.write_json(os.path.join(folder, "request.json"),
                              {"schema": "dlaunch.dump_request/1", "unix_ms": now,
                               "pid": self.pid, "trigger": trigger, "ranks": [self.rank]})
        except OSError:
            pass

    def _die_of(self, signum):
        with self._dump_lock:  # held into the kill: no other dump is half-written
            self.dump("signal")
            try:
                signal.signal(signum, signal.SIG_DFL)
            except ValueError:
                pass
            os.kill(os.getpid(), signum)

    def _at_exit(self):
        self._stopping.set()
        self.set_phase("done")
        self.dump(self._exit_reason)

    # ---- what the hooks and the API report
    def set_phase(self, phase):
        with self._lock:
            if self._in_collective.get(threading.get_ident()) is not None:
                self._in_collective[threading.get_ident()] = phase
                return
            if phase != self.phase:
                self.phase = phase
                self.phase_since_ms = int(time.time() * 1000)

    def enter_collective(self, entry):
        with self._lock:
            self._in_collective[threading.get_ident()] = self.phase
            self.phase = "communication"
            self.phase_since_ms = int(time.time() * 1000)

    def leave_collective(self, entry):
        with self._lock:
            prev = self._in_collective.pop(threading.get_ident(), None)
            if prev is not None:
                self.phase = prev
                self.phase_since_ms = int(time.time() * 1000)

    def _step_boundary(self):
        """A step ended (under self._lock): its busy time joins the totals."""
        now = time.monotonic_ns()
        comm = self.recorder.comm_ns()
        if self._boundary is not None:
            wall, was_comm = now - self._boundary[0], comm - self._boundary[1]
            self.steps_timed += 1
            self.step_busy_ms += max(0, wall - was_comm) / 1e6
        self._boundary = (now, comm)

    def ddp_forward(self):
        """A DDP forward began: a step boundary while no optimizer step has been seen."""
        with self._lock:
            if self._stepped_optimizer is None:
                self._step_boundary()

    def optimizer_stepped(self, optimizer_id):
        with self._lock:
            n = self._opt_steps.get(optimizer_id, 0) + 1
            self._opt_steps[optimizer_id] = n
            if self._stepped_optimizer is None:
                # The DDP forwards were the boundaries until now: time from here, on the first
                # optimizer's steps (with several, each steps once per training step).
                self._stepped_optimizer = optimizer_id
                self._boundary = None
            if optimizer_id == self._stepped_optimizer:
                self._step_boundary()
            if not self.explicit_steps and n > self.step:
                self.step = n
                self.progress_ms = int(time.time() * 1000)
            self.phase = "data"
            self.phase_since_ms = int(time.time() * 1000)

    def set_step(self, step):
        with self._lock:
            self.explicit_steps = True
            self.step = int(step)
            self.progress_ms = int(time.time() * 1000)

    def push_section(self, name, timeout_s):
        with self._lock:
            now = int(time.time() * 1000)
            self.sections.append({"name": name, "timeout_s": timeout_s, "since_unix_ms": now,
                                  "phase_before": self.phase})
            self.phase = "checkpoint" if name == "checkpoint" else self.phase
            self.phase_since_ms = now
        self._write_heartbeat()

    def pop_section(self):
        with self._lock:
            if self.sections:
                s = self.sections.pop()
                self.phase = s["phase_before"]
                self.phase_since_ms = int(time.time() * 1000)
            self.progress_ms = int(time.time() * 1000)
        self._write_heartbeat()

    # ---- the files
    def _status(self):
        rec = self.recorder
        now = int(time.time() * 1000)
        flying = rec.in_flight()
        with self._lock:
            status = {
                "schema": "dlaunch.heartbeat/1",
                "rank": self.rank,
                "pid": self.pid,
                "unix_ms": now,
                "step": self.step,
                "phase": self.phase,
                "phase_since_unix_ms": self.phase_since_ms,
                "progress_unix_ms": max(self.progress_ms, rec.last_change_ns // 1000000),
                "last_started_seq": rec.last_started,
                "last_completed_seq": rec.last_completed,
                "current_op": flying.op if flying is not None else "",
                "in_flight": None,
                "section": None,
                "rss_bytes": _memory.rss_bytes(),
                "peak_rss_bytes": _memory.peak_rss_bytes(),
                "steps_timed": self.steps_timed,
                "step_busy_ms_total": round(self.step_busy_ms, 3),
            }
            if self.sections:
                s = self.sections[-1]
                status["section"] = {"name": s["name"], "timeout_s": s["timeout_s"],
                                     "since_unix_ms": s["since_unix_ms"]}
        if flying is not None:
            status["in_flight"] = {"seq": flying.seq, "op": flying.op, "pg": flying.pg,
                                   "pg_seq": flying.pg_seq,
                                   "since_unix_ms": flying.started_ns // 1000000,
                                   "call_site": flying.call_site}
        first, starts = rec.arrivals()
        if first >= 0:
            status["arrivals"] = {"first_seq": first, "started_unix_us": starts}
        status.update(_memory.cuda_stats())
        return status

    def _write_heartbeat(self, announce=False):
        if self._detached:
            return None
        status = self._status()
        try:
            _files.write_json(self._path(HEARTBEAT_FILE), status)
            if announce:
                self._send_heartbeat(status, None)
        except OSError as e:
            self._send_heartbeat(status, e)
        return status

    def _send_heartbeat(self, status, error):
        """The heartbeat as one line through the launcher's pipe, which needs no disk: once as
        the agent starts (error None: the rank says it runs the agent), then whenever
        heartbeat.json could not be written, with the reason. A line the launcher has no room
        for yet is dropped (the next one follows within a wake)."""
        if self._pipe is None:
            return
        doc = dict(status)
        if error is not None:
            doc["write_error"] = "%s: [Errno %s] %s" % (HEARTBEAT_FILE, error.errno,
                                                        error.strerror)
        line = json.dumps(doc, separators=(",", ":")) + "\n"
        if len(line) > _PIPE_BUF:
            # The straggler figures and the call site are what can grow; liveness needs neither.
            doc.pop("arrivals", None)
            if doc.get("in_flight"):
                doc["in_flight"] = dict(doc["in_flight"], call_site="")
            line = json.dumps(doc, separators=(",", ":")) + "\n"
        if len(line) > _PIPE_BUF:
            return
        try:
            os.write(self._pipe, line.encode())
        except BlockingIOError:
            pass
        except OSError:
            self._pipe = None  # the launcher is gone

    def _write_telemetry(self, status, force=False):
        if self.events is None:
            return
        key = (status["step"], status["phase"])
        now = time.monotonic()
        if not force and key == self._telemetry_key and now - self._telemetry_written < 10:
            return
        self._telemetry_key = key
        self._telemetry_written = now
        line = {"unix_ms": status["unix_ms"], "rank": self.rank, "kind": "telemetry",
                "source": "python", "step": status["step"], "phase": status["phase"],
                "rss_bytes": status["rss_bytes"], "peak_rss_bytes": status["peak_rss_bytes"]}
        for k in ("device_allocated_bytes", "device_reserved_bytes", "device_peak_bytes",
                  "device_free_bytes", "device_total_bytes"):
            if k in status:
                line[k] = status[k]
        self.events.append(line)

    def write_flight(self, reason):
        rec = self.recorder
        try:
            _files.write_atomically(self._path(FLIGHT_FILE), rec.to_text(reason),
                                    durable=reason != "periodic")
            self._flight_version = rec.version
            self._flight_written = time.monotonic()
        except OSError:
            pass

    def write_stacks(self, reason):
        frames = sys._current_frames()
        names = {t.ident: t for t in threading.enumerate()}
        main_ident = threading.main_thread().ident
        out = ["Python stacks of rank %d (pid %d) at %s: %s" %
               (self.rank, self.pid, time.strftime("%Y-%m-%d %H:%M:%S"), reason)]
        order = sorted(frames, key=lambda ident: ident != main_ident)
        for ident in order:
            t = names.get(ident)
            name = t.name if t is not None else "?"
            if t is not None and t.name == "dlaunch-agent":
                continue
            out.append("")
            out.append('Thread %d "%s"%s (most recent call last):' %
                       (ident, name, " (main)" if ident == main_ident else ""))
            for line in traceback.format_stack(frames[ident]):
                out.append(line.rstrip("\n"))
        out.extend(_workers.describe(frames.get(main_ident)))
        try:
            _files.write_atomically(self._path(STACKS_FILE), "\n".join(out) + "\n", durable=True)
        except OSError:
            pass

    def dump(self, reason, stacks=False):
        """flight.json (and py_stacks.txt when asked). Safe from any thread."""
        if self._detached:
            return
        with self._dump_lock:
            if stacks:
                self.write_stacks(reason)
            self.write_flight(reason)
            _torch_fr.dump(self.rank, self.recorder.backend)
            status = self._write_heartbeat()
            self._write_telemetry(status, force=True)

    def record_exception(self, exc, tb):
        if self._detached or self._error_written:
            return
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            return
        self._error_written = True
        now = int(time.time() * 1000)
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        classified = _memory.classify_oom(exc)
        doc = {"schema": "dlaunch.error/1", "rank": self.rank, "unix_ms": now,
               "kind": "error", "exception": type(exc).__name__,
               "message": "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0]
                                      if str(exc).strip() else ""),
               "traceback": text, "call_site": _last_frame(tb), "source": "python"}
        if classified is not None:
            device, requested = classified
            figures, advice = _memory.oom_report(exc, device, requested)
            doc["kind"] = "oom"
            doc["device"] = device
            doc["tried_to_allocate_bytes"] = requested
            doc["memory"] = figures
            doc["advice"] = advice
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            doc["message"] = first[:500]
        try:
            _files.write_json(self._path(ERROR_FILE), doc, durable=True)
        except OSError:
            pass
        if self.events is not None:
            event = {k: doc[k] for k in ("unix_ms", "rank", "kind", "message")}
            if "tried_to_allocate_bytes" in doc:
                event["tried_to_allocate_bytes"] = doc["tried_to_allocate_bytes"]
            self.events.append(event)
        self.dump("error")

    # ---- the agent's thread
    def _loop(self):
        next_beat = 0.0
        while not self._stopping.is_set():
            if self._wakeup_r is not None:
                import select

                ready, _, _ = select.select([self._wakeup_r], [], [], _POLL_S)
                if ready:
                    try:
                        data = os.read(self._wakeup_r, 64)
                    except OSError:
                        data = b""
                    # Re-deliver to Python's own handler too (set_wakeup_fd consumed nothing).
                    if signal.SIGTERM in data and signal.getsignal(signal.SIGTERM) == \
                            self._on_sigterm:
                        self._die_of(signal.SIGTERM)
                    elif signal.SIGUSR1 in data and signal.getsignal(signal.SIGUSR1) == \
                            self._on_sigusr1:
                        self.dump_on_request("SIGUSR1")
                    elif signal.SIGINT in data:
                        # KeyboardInterrupt reaches the main thread only once it is back in
                        # Python, never while it waits inside a collective: dump now.
                        self.dump("signal")
            else:
                self._stopping.wait(_POLL_S)
            try:
                self._tick(time.monotonic(), next_beat)
            except Exception:
                pass
            if time.monotonic() >= next_beat:
                next_beat = time.monotonic() + self.heartbeat_s

    def _tick(self, now, next_beat):
        stamp = _request_stamp(self._path(DUMP_REQUEST_FILE))
        if stamp is not None and stamp != self._request_stamp:
            self._request_stamp = stamp
            reason = "request"
            self.dump(reason, stacks=True)
            return
        if now >= next_beat:
            status = self._write_heartbeat()
            self._write_telemetry(status)
        rec = self.recorder
        if rec.version != self._flight_version and now - self._flight_written >= _FLIGHT_EVERY_S:
            self.write_flight("periodic")


def _last_frame(tb):
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return ""
    code = last.tb_frame.f_code
    return "%s:%d %s" % (code.co_filename, last.tb_lineno, code.co_name)
