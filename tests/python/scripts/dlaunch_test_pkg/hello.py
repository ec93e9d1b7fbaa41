# Run as `dlaunch -m dlaunch_test_pkg.hello ARG`.
import os
import sys

print("module", __name__, "rank", os.environ["RANK"], "args", sys.argv[1:])
