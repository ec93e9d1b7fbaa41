# A rank that forks children, as a script may (os.fork, multiprocessing's fork). MODE:
#   ok:   a child dies of an exception, another of a SIGTERM; the rank all-reduces and exits 0.
#   fail: the rank dies of its own exception; a child it forked then dies of another.
# The rank's files (error.json, heartbeat.json, flight.json) must stay the rank's.
import atexit
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def fork(child):
    """Forks `child`, which runs once go() lets it; returns (pid, its pipes)."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(ready_w, b"x")  # past the fork and its at-fork hooks
        os.read(go_r, 1)
        child()
        os._exit(0)
    return pid, (ready_r, go_w)


def child_raises():
    raise ValueError("the child's own error")


def child_sleeps():
    time.sleep(60)


def go(pipes):
    os.read(pipes[0], 1)
    os.write(pipes[1], b"x")


mode = sys.argv[1]
if mode == "ok":
    pid, pipes = fork(child_raises)
    go(pipes)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status), flush=True)
    # Its handler is the agent's, inherited: the signal must end the child alone.
    pid, pipes = fork(child_sleeps)
    go(pipes)
    os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status), flush=True)
    dist.init_process_group("gloo")
    t = torch.ones(16)
    dist.all_reduce(t)
    dist.destroy_process_group()
    print("parent", os.getpid(), "done", flush=True)
else:
    pid, pipes = fork(child_raises)

    def child_fails_after_the_parent():
        go(pipes)
        os.waitpid(pid, 0)

    atexit.register(child_fails_after_the_parent)  # runs before the agent's own exit handler
    torch.ones(4).sum()
    raise RuntimeError("the parent's own error")
