"""Loads dlaunch's rank agent into every Python process of a dlaunch job.

dlaunch puts this folder first on PYTHONPATH. Python imports the first sitecustomize it finds,
so this one also runs the one it shadows (Debian's, a virtualenv's, the user's) before anything
else. The agent itself starts only inside a dlaunch rank and only once per rank: a process the
rank starts (a DataLoader worker, a subprocess) inherits the marker and stays untouched.
"""
import importlib.machinery
import importlib.util
import os
import sys


def _chain_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the shadowed file's own failure must not hide the job
        print("dlaunch: %s failed: %s: %s" % (spec.origin, type(e).__name__, e), file=sys.stderr)


_chain_shadowed_sitecustomize()

if os.environ.get("DLAUNCH_RANK_DIR") and os.environ.get("DLAUNCH_PYTHON_AGENT", "1") != "0":
    try:
        from dlaunch import _agent

        _agent.start_from_env()
    except Exception as e:
        print("dlaunch: the Python rank agent did not start: %s: %s" % (type(e).__name__, e),
              file=sys.stderr)
