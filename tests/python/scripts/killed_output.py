# Prints a line (no flush) and is SIGKILLed: the line must survive in stdout.log.
import os
import signal

print("before the kill on rank", os.environ["RANK"])
os.kill(os.getpid(), signal.SIGKILL)
