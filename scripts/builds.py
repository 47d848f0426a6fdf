"""Which build of torch and jax `make install` puts in .venv on this machine (standard library only).

    python scripts/builds.py torch    # the pip arguments for torch, on one line
    python scripts/builds.py jax      # the pip arguments for jax
    python scripts/builds.py explain  # both, and why

torch on PyPI is one wheel for Linux, built with CUDA (several GB of nvidia-* wheels);
its CPU build (``+cpu``, about 200 MB) lives on PyTorch's own index, or on a machine's
local wheels. So, unless ``TORCH`` says otherwise:

- a machine whose ``nvidia-smi`` lists a GPU gets the CUDA builds: PyPI's torch and
  ``jax[cuda12]`` (``device: cuda`` and ``auto`` then train on the GPU);
- any other gets the CPU build, from the first place that offers it: the indexes and
  wheel folders pip is configured with, else PyTorch's CPU index; where neither does
  (an index that is not reachable), PyPI's plain wheel, which runs on a CPU too.

``TORCH=cpu`` or ``TORCH=cuda`` forces either (``make install TORCH=cpu``); ``TORCH=plain``
takes PyPI's wheel as it is. The decision is made from ``pip index versions``, which
reads an index's listing and downloads nothing (tests/test_install.py checks it with the
extra indexes hidden).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

TORCH = "2.13.0"     # the versions of constraints.txt: a change there is a change here
JAX = "0.7.1"
# PyTorch's own index of CPU builds (a variable, so a test can point it elsewhere)
CPU_INDEX = os.environ.get("MOSAIC_TORCH_CPU_INDEX", "https://download.pytorch.org/whl/cpu")
CHOICES = ("cpu", "cuda", "plain")


def has_nvidia_gpu() -> bool:
    """``nvidia-smi -L`` answers with at least one GPU."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def offered(version: str, *index_args: str) -> bool:
    """Whether pip, as configured (plus ``index_args``), finds torch ``version`` (exactly, local label
    included): ``pip index versions`` reads the listings and downloads no wheel."""
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "torch", *index_args],
                             capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    listed = re.search(r"Available versions: (.*)", out.stdout)
    return out.returncode == 0 and listed is not None and version in [v.strip() for v in listed.group(1).split(",")]


def torch_choice() -> tuple[list[str], str]:
    """The pip arguments that install torch here, and why."""
    forced = os.environ.get("TORCH", "").strip().lower()
    if forced and forced not in CHOICES:
        raise SystemExit(f"TORCH={forced}: choose one of {', '.join(CHOICES)}")
    want = forced or ("cuda" if has_nvidia_gpu() else "cpu")
    why = "TORCH=" + forced if forced else ("nvidia-smi lists a GPU" if want == "cuda" else "no NVIDIA GPU")
    if want in ("cuda", "plain"):
        return [f"torch=={TORCH}"], f"{why}: PyPI's torch {TORCH} (built with CUDA)"
    cpu = f"{TORCH}+cpu"
    if offered(cpu):
        return [f"torch=={cpu}"], f"{why}: torch {cpu}, which pip's indexes offer"
    if offered(cpu, "--index-url", CPU_INDEX):
        return ["--extra-index-url", CPU_INDEX, f"torch=={cpu}"], f"{why}: torch {cpu} from {CPU_INDEX}"
    return [f"torch=={TORCH}"], (f"{why}, and no index offers torch {cpu} ({CPU_INDEX} not reachable): "
                                 f"PyPI's torch {TORCH}, the CUDA build, which runs on the CPU too (several GB)")


def jax_choice() -> tuple[list[str], str]:
    forced = os.environ.get("TORCH", "").strip().lower()   # one switch for both libraries
    cuda = forced == "cuda" or (not forced and has_nvidia_gpu())
    if cuda:
        return [f"jax[cuda12]=={JAX}"], "jax with its CUDA 12 plugin"
    return [f"jax[cpu]=={JAX}"], "jax for the CPU"


def main(argv: list[str]) -> int:
    what = argv[1] if len(argv) > 1 else "explain"
    if what == "torch":
        print(" ".join(torch_choice()[0]))
    elif what == "jax":
        print(" ".join(jax_choice()[0]))
    elif what == "explain":
        for name, choice in (("torch", torch_choice), ("jax", jax_choice)):
            args, why = choice()
            print(f"{name}: {' '.join(args)}   ({why})")
    else:
        print(f"usage: {argv[0]} torch|jax|explain", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
