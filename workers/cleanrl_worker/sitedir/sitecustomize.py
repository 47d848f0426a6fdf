"""Arms mosaic's patches in a CleanRL script's process (see workers/cleanrl_worker/patches.py).

The CleanRL worker puts this directory first on the script's PYTHONPATH, so
Python runs this file at startup, before the script's first line. It does
nothing unless the worker set MOSAIC_CLEANRL_PATCH=1, and it takes itself out
of the environment so the script's own subprocesses start unpatched. A script
that cannot be patched does not run (it would train without telemetry).
"""
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
try:
    from workers.sdk import sitechain
except ImportError:  # mosaic-tui not importable from sys.path: from the checkout this directory is in
    sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(_here))))
    from workers.sdk import sitechain


def _install():
    if os.environ.get("MOSAIC_CLEANRL_PATCH") != "1":
        return
    from workers.cleanrl_worker import patches

    patches.install_from_environ()
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != _here]
    if parts:
        os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    else:
        os.environ.pop("PYTHONPATH", None)
    os.environ.pop("MOSAIC_CLEANRL_PATCH", None)


sitechain.arm(_here, _install, "install the CleanRL patches", fatal=True)
