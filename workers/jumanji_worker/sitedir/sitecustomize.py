"""Lets ``jumanji.training`` import without its logger packages in every process
started with this directory first on PYTHONPATH (workers/jumanji_worker/shims.py
says why). The Jumanji worker calls shims.install() itself; this file serves the
processes it does not start in-process: jumanji's own train loop in bench/.
"""
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _install():
    try:
        from workers.jumanji_worker import shims
    except ImportError:
        # mosaic-tui not importable from sys.path: load the module from beside this directory
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(_here))))
        from workers.jumanji_worker import shims
    shims.install()


try:
    _install()
except Exception as exc:  # never stop a process from starting: jumanji's ImportError will follow
    sys.stderr.write(f"mosaic: cannot shim jumanji.training's loggers: {exc!r}\n")
try:
    from workers.sdk.sitechain import run_shadowed_sitecustomize
except ImportError:
    pass
else:
    run_shadowed_sitecustomize(_here)
