# Rank 1 raises inside @record after os.chdir(), then 20 lines of noise follow the traceback.
import os
import sys

from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    os.chdir("/")
    if int(os.environ["RANK"]) == 1:
        raise ValueError("bad value on rank 1")


try:
    main()
finally:
    for i in range(20):
        print("cleanup noise line", i, file=sys.stderr)
