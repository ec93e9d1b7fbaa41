# collectives.py as a module: `dlaunch -m dlaunch_test_pkg.faulty MODE`.
import os
import runpy

runpy.run_path(os.path.join(os.path.dirname(__file__), "..", "collectives.py"), run_name="__main__")
