# torch's FileTimerClient against the launcher's FileTimer server (TORCHELASTIC_ENABLE_FILE_TIMER=1).
#   overrun [RANK]: RANK's (1's) expires(after=1) block sleeps 60 s; the others sleep until torn
#                   down.
#   healthy: every rank's blocks end in time; exit 0.
#   hostile PID: malformed lines and a request for the foreign PID, then an expired timer for a
#                child of the rank: its kill shows that the server read everything before it;
#                exit 0.
import os
import subprocess
import sys
import time

import torch.distributed.elastic.timer as timer
from torch.distributed.elastic.timer import FileTimerClient

mode = sys.argv[1]
rank = int(os.environ["RANK"])
path = os.environ["TORCHELASTIC_TIMER_FILE"]
print("timer file", path, flush=True)
timer.configure(FileTimerClient(path))

if mode == "overrun":
    if rank == int(sys.argv[2] if len(sys.argv) > 2 else 1):
        with timer.expires(after=1, scope="step"):
            print("rank", rank, "enters the block", flush=True)
            time.sleep(60)
        print("rank", rank, "was not killed", flush=True)
        sys.exit(5)
    time.sleep(60)
elif mode == "healthy":
    for step in range(3):
        with timer.expires(after=5, scope="step"):
            time.sleep(0.1)
    print("rank", rank, "done", flush=True)
elif mode == "hostile":
    foreign = int(sys.argv[2])
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    past = time.time() - 10
    lines = [
        b"not json\n",
        b'{"pid": "x", "scope_id": "a", "expiration_time": 1, "signal": 9}\n',
        b'{"version": 1, "pid": 0, "scope_id": "a", "expiration_time": %f, "signal": 9}\n' % past,
        b'{"version": 1, "pid": -1, "scope_id": "a", "expiration_time": %f, "signal": 9}\n' % past,
        b'{"version": 1, "pid": %d, "scope_id": "a", "expiration_time": %f, "signal": 9}\n'
        % (foreign, past),
        b'{"version": 1, "pid": 1, "scope_id": "a", "expiration_time": %f, "signal": 9}\n' % past,
        b'{"pid": %d, "scope_id": "' % foreign + b"y" * 20000 + b'", "signal": 9}\n',
    ]
    # The sentinel: an expired timer for a child of the rank, which the server kills. (A signal
    # to the rank itself would reach whichever of its threads does not block it, the agent's
    # among them, not this one's sigtimedwait.)
    child = subprocess.Popen(["sleep", "60"])
    lines.append(b'{"version": 1, "pid": %d, "scope_id": "sentinel", "expiration_time": %f, '
                 b'"signal": 9}\n' % (child.pid, past))
    for line in lines:
        while line:  # a non-blocking write may take part of a long line
            line = line[os.write(fd, line):]
    os.close(fd)
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        print("the sentinel timer never fired", flush=True)
        sys.exit(4)
    print("rank", rank, "survived; the sentinel child ended by signal", -child.returncode,
          flush=True)
