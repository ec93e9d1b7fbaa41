"""The DataLoader workers a rank's main thread waits on, for py_stacks.txt: their pids and
process states, and the Python stacks of the worker it waits for.

A forked child of the rank (a DataLoader worker with the fork start method) registers faulthandler
for SIGUSR1 on a pipe the rank made before the fork, unless SIGUSR1 has a handler of the user's.
On a dump, the rank's agent signals the waited-for worker and reads its stacks from that pipe.
Standard library only; never raises.
"""
import faulthandler
import os
import select
import signal
import time

# Set by the agent: the SIGUSR1 handler it installs in the rank (a child inherits it).
agent_sigusr1 = None

_pipe = None  # (read fd, write fd), made before the rank's first fork
_MAX_FRAMES = 60
_ANSWER_S = 0.5  # how long a worker may take to write its stacks
_QUIET_S = 0.05  # its dump is complete once the pipe is quiet this long


def _ours(handler):
    return handler in (signal.SIG_DFL, None) or (agent_sigusr1 is not None and
                                                 handler == agent_sigusr1)


def before_fork():
    global _pipe
    if _pipe is not None:
        return
    try:
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)  # a dump nobody reads must never block the worker
        _pipe = (r, w)
    except OSError:
        _pipe = None


def in_child():
    """In a forked child: its stacks go to the rank's pipe on SIGUSR1."""
    global _pipe
    if _pipe is None:
        return
    r, w = _pipe
    _pipe = None
    try:
        os.close(r)
    except OSError:
        pass
    try:
        if _ours(signal.getsignal(signal.SIGUSR1)):
            faulthandler.register(signal.SIGUSR1, file=w, all_threads=True, chain=False)
    except (ValueError, OSError, RuntimeError, AttributeError):
        pass


def _state(pid):
    """"S (sleeping)" from /proc/PID/status, or None once the process is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("State:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return "?"


def _loader_iterator(frame):
    """The multiprocessing DataLoader iterator a frame of the main thread runs in, or None."""
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_argcount and code.co_varnames[0] == "self" and \
                "/torch/utils/data/" in code.co_filename:
            obj = frame.f_locals.get("self")
            if hasattr(obj, "_workers") and hasattr(obj, "_task_info"):
                return obj
        frame = frame.f_back
    return None


def _forked(worker):
    popen = getattr(worker, "_popen", None)
    return popen is not None and type(popen).__module__ == "multiprocessing.popen_fork"


def _read_stacks(pid):
    """The worker's faulthandler dump, or "" when it did not answer in time."""
    if _pipe is None:
        return ""
    r = _pipe[0]
    try:
        while os.read(r, 65536):  # what an earlier, unasked-for dump left
            pass
    except (BlockingIOError, OSError):
        pass
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return ""
    chunks = []
    deadline = time.monotonic() + _ANSWER_S
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([r], [], [], min(left, _QUIET_S) if chunks else left)
        if not ready:
            break
        try:
            data = os.read(r, 65536)
        except (BlockingIOError, OSError):
            continue
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def describe(main_frame):
    """Lines for py_stacks.txt about the DataLoader workers the main thread's loader has (none
    when it has none, or without a main frame): a blank line, a summary line, then the
    waited-for worker's stacks."""
    try:
        it = _loader_iterator(main_frame)
        if it is None:
            return []
        workers = list(it._workers)
        waited = None
        info = it._task_info.get(it._rcvd_idx) if hasattr(it, "_rcvd_idx") else None
        if info is not None and len(info) == 1:
            waited = info[0]
        states = [_state(w.pid) if w.pid else None for w in workers]
        parts = ["worker %d (pid %s, %s)" % (i, w.pid, states[i] or "gone")
                 for i, w in enumerate(workers)]
        line = "DataLoader workers of the main thread's loader: " + ", ".join(parts)
        if waited is not None:
            line += "; it waits for worker %d (batch %d)" % (waited, it._rcvd_idx)
        out = ["", line]
        if waited is not None and 0 <= waited < len(workers):
            w = workers[waited]
            can_ask = _forked(w) and _ours(signal.getsignal(signal.SIGUSR1))
            stacks = _read_stacks(w.pid) if can_ask and states[waited] else ""
            if stacks.strip():
                out.append("Worker %d (pid %d) stacks (most recent call first):" % (waited, w.pid))
                out.extend(stacks.rstrip("\n").splitlines())
        return out
    except Exception:
        return []
