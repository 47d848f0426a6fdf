"""Arms mosaic's patches in a CleanRL script's process (see workers/cleanrl_worker/patches.py).

The CleanRL worker puts this directory first on the script's PYTHONPATH, so
Python runs this file at startup, before the script's first line. It does
nothing unless the worker set MOSAIC_CLEANRL_PATCH=1, and it takes itself out
of the environment so the script's own subprocesses start unpatched.
"""
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _forget_this_directory():
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != _here]
    if parts:
        os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    else:
        os.environ.pop("PYTHONPATH", None)
    os.environ.pop("MOSAIC_CLEANRL_PATCH", None)


if os.environ.get("MOSAIC_CLEANRL_PATCH") == "1":
    try:
        from workers.cleanrl_worker import patches

        patches.install_from_environ()
    except BaseException:
        # Python would report "Error in sitecustomize" and run the script
        # unpatched, without telemetry: stop instead, saying why.
        import traceback

        traceback.print_exc()
        sys.stderr.write("mosaic: cannot install the CleanRL patches\n")
        sys.stderr.flush()
        os._exit(3)
    _forget_this_directory()
try:
    from workers.sdk.sitechain import run_shadowed_sitecustomize
except ImportError:  # mosaic-tui not importable here: nothing of ours to chain from
    pass
else:
    run_shadowed_sitecustomize(_here)
