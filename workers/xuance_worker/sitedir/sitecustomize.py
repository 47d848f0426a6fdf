"""Serves ``pettingzoo.mpe.*`` from mpe2, adds MultiGrid and ViZDoom to XuanCe's registries and fixes XuanCe's bugs (fixes.py), in every process of a XuanCe run.

The XuanCe worker puts this directory first on PYTHONPATH. Python runs this
file at the start of every process that inherits it, in particular the
processes XuanCe spawns for ``SubprocVecMultiAgentEnv``: they import XuanCe's
MPE module afresh, and it imports ``pettingzoo.mpe.<scenario>``, which
PettingZoo 1.27 no longer has (see workers/xuance_worker/mpe_alias.py).
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
    from workers.xuance_worker import fixes, mpe_alias, multigrid, vizdoom

    mpe_alias.install()
    multigrid.install()  # the multigrid family in XuanCe's registry, once XuanCe loads it
    vizdoom.install()  # and ViZDoom in its single-agent one
    from workers.xuance_worker import sisl
    sisl.install()  # and PettingZoo's SISL games in its multi-agent one
    fixes.install()  # XuanCe's import-time fixes (workers/xuance_worker/fixes.py)


# never stop a process from starting: XuanCe's ImportError follows, where it matters
sitechain.arm(_here, _install, "alias pettingzoo.mpe to mpe2 or register MultiGrid")
