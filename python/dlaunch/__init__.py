"""dlaunch inside a job: tell the launcher what it cannot infer.

    import dlaunch
    for step, batch in enumerate(loader):
        ...
        dlaunch.step(step)                      # progress, when optimizer.step() is not it
    with dlaunch.section("checkpoint", timeout_s=900):
        save(model)                             # long, declared: not mistaken for a hang

Outside a dlaunch job every call does nothing, so a script runs unchanged under torchrun or
python alone.
"""
import contextlib

from . import _agent

__all__ = ["step", "section", "dump", "in_job"]


def in_job():
    """Whether this process is a dlaunch rank with the agent running."""
    return _agent.current() is not None


def step(n=None):
    """Reports training step `n` (or one more than the last). From then on the optimizer's
    steps are not counted."""
    agent = _agent.current()
    if agent is None:
        return
    agent.set_step(agent.step + 1 if n is None else n)


@contextlib.contextmanager
def section(name, timeout_s=None):
    """Declares a long stretch (checkpointing, evaluation, a data reshuffle). While it lasts the
    launcher does not report a hang caused by this rank, up to `timeout_s` seconds (None: the
    job's --hang-timeout)."""
    agent = _agent.current()
    if agent is None:
        yield
        return
    agent.push_section(str(name), None if timeout_s is None else float(timeout_s))
    try:
        yield
    finally:
        agent.pop_section()


def dump(reason="user"):
    """Writes this rank's flight recorder and Python stacks into its rank directory now."""
    agent = _agent.current()
    if agent is not None:
        agent.dump(reason, stacks=True)
