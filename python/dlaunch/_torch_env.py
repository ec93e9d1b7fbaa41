"""torch's flight-recorder settings under the name the installed torch reads.

The launcher cannot tell which torch a rank will import, so unless the user chose a size it sets
both TORCH_FR_BUFFER_SIZE (torch 2.7 and later read it first) and TORCH_NCCL_TRACE_BUFFER_SIZE
(torch 2.2-2.6 read only it), and names the old one in DLAUNCH_TORCH_ENV_DEFAULTS. A torch that
reads the new name warns on every rank when the old one is set at all, so once torch is imported,
before any process group reads them, the agent unsets the old name where this torch reads the
new one. The user's own settings are never touched."""
import os

DEFAULTS_VAR = "DLAUNCH_TORCH_ENV_DEFAULTS"
NEW, OLD = "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"
_HEADER = os.path.join("include", "torch", "csrc", "distributed", "c10d", "FlightRecorder.hpp")


def _version(text):
    """(major, minor) of a torch version string ("2.15.0+cu132", "1.13.0a0"), or None."""
    parts = text.split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or "x")
    except (IndexError, ValueError):
        return None


def reads_new_name(torch_dir, version):
    """Whether the torch in `torch_dir` reads TORCH_FR_BUFFER_SIZE. Its own FlightRecorder.hpp
    says so where the wheel ships headers; else its version (2.7 and later) does. Blocks for one
    read of a ~30 KiB file."""
    try:
        with open(os.path.join(torch_dir, _HEADER), "rb") as f:
            return NEW.encode() in f.read()
    except OSError:
        pass
    v = _version(version or "")
    return v is not None and v >= (2, 7)


def settle(environ, torch_module):
    """Unsets the old name in `environ` when dlaunch set it (DEFAULTS_VAR lists it, and the new
    name is set too) and `torch_module` reads the new name. Returns the names it unset."""
    defaulted = environ.get(DEFAULTS_VAR, "").split(",")
    if OLD not in defaulted or not environ.get(NEW) or OLD not in environ:
        return []
    torch_file = getattr(torch_module, "__file__", None)
    if not torch_file:
        return []
    version = getattr(getattr(torch_module, "version", None), "__version__", None) or getattr(
        torch_module, "__version__", "")
    if not reads_new_name(os.path.dirname(os.path.abspath(torch_file)), str(version)):
        return []
    del environ[OLD]
    return [OLD]
