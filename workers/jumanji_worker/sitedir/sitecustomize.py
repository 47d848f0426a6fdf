"""Lets ``jumanji.training`` import without its logger packages in every process
started with this directory first on PYTHONPATH (workers/jumanji_worker/shims.py
says why). The Jumanji worker calls shims.install() itself; this file serves the
processes it does not start in-process: jumanji's own train loop in bench/.
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
    from workers.jumanji_worker import shims

    shims.install()


# never stop a process from starting: jumanji's ImportError follows, where it matters
sitechain.arm(_here, _install, "shim jumanji.training's loggers")
