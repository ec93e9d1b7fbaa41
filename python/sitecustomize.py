"""Loads dlaunch's rank agent into every Python process of a dlaunch job.

dlaunch puts this folder first on PYTHONPATH, after any --env PYTHONPATH too. Python imports the
first sitecustomize it finds, so this one runs the one it shadows (Debian's, a virtualenv's, the
user's) as Python's site module would have: under the name sitecustomize in sys.modules, with its
own __file__, so that `import sitecustomize` finds the user's module. Then usercustomize, where
site would run it (site's own `import usercustomize` after this finds it done), and only then the
agent, whose hooks wrap what the two installed. The agent itself starts only inside a dlaunch rank
and only once per rank: a process the rank starts (a DataLoader worker, a subprocess) inherits the
marker and stays untouched.
"""
import importlib
import importlib.machinery
import importlib.util
import os
import site
import sys


def _chain_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    ours = sys.modules.get("sitecustomize")
    # The import under way returns what sys.modules holds once this file is done: the user's.
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the shadowed file's own failure must not hide the job
        sys.modules["sitecustomize"] = ours
        print("dlaunch: %s failed: %s: %s" % (spec.origin, type(e).__name__, e), file=sys.stderr)


def _run_usercustomize():
    """site's execusercustomize, run before the agent starts."""
    if not getattr(site, "ENABLE_USER_SITE", False):
        return
    try:
        importlib.import_module("usercustomize")
    except Exception as e:
        if not (isinstance(e, ImportError) and e.name == "usercustomize"):
            print("Error in usercustomize; set PYTHONVERBOSE for traceback:\n%s: %s" %
                  (type(e).__name__, e), file=sys.stderr)
            sys.modules["usercustomize"] = None  # site's own import then passes over it quietly


def _start_agent():
    rank_dir = os.environ.get("DLAUNCH_RANK_DIR")
    if not rank_dir or os.environ.get("DLAUNCH_PYTHON_AGENT", "1") == "0":
        return
    try:
        from dlaunch import _agent

        _agent.start_from_env()
    except Exception as e:
        # The launcher says so once for the job, with these words (launcher/job/agent_watch.h).
        why = "%s: %s" % (type(e).__name__, e)
        try:
            with open(os.path.join(rank_dir, "agent_error.txt"), "w") as f:
                f.write(why + "\n")
        except OSError:
            print("dlaunch: the Python rank agent did not start: " + why, file=sys.stderr)


_chain_shadowed_sitecustomize()
_run_usercustomize()
_start_agent()
