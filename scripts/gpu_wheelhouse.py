"""The wheelhouse of the GPU check (issue 46): the wheels, for the device machine's Python (3.12,
manylinux x86_64), of what the check needs beyond what that machine has (CUDA torch, jax with its
CUDA plugin, numpy, scipy). `make gpu-wheelhouse` runs it; scripts/gpu_check installs it there.

    python scripts/gpu_wheelhouse.py [--dir build/gpu-wheelhouse] [--groups core,cleanrl,...] [--budget-mb 60]

Which packages: the dependency closure, read from this .venv's installed metadata (so the same
versions as here), of mosaic's own dependencies and the extras of the workers the check runs.
Each is fetched for cp312 (`pip download --no-deps --only-binary=:all:`); one with no wheel is
built from its sdist with `pip wheel` (fine for a pure-Python one, reported if it came out binary).
The working tree travels to the device machine with at most 64 MiB of ignored paths, so the total
is checked against --budget-mb; over it, the script says which groups to leave out.
"""
from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent

# what each group needs: requirement strings resolved against this .venv's installed packages
GROUPS: dict[str, list[str]] = {
    # the daemon and CLI, NVML (the resources panel's GPU figures), setuptools for the editable install
    "core": ["orjson", "pydantic", "platformdirs", "textual", "textual-plotext", "plotext", "pillow",
             "psutil", "PyYAML", "nvidia-ml-py", "setuptools", "wheel", "packaging"],
    # cleanrl itself is installed with --no-deps (its metadata pins python<3.11)
    # (its scripts import wandb only with --track; pygame only to render)
    "cleanrl": ["cleanrl", "gym", "gymnasium", "stable-baselines3", "tensorboard", "h5py", "rich"],
    "tianshou": ["tianshou[eval]", "pandas", "gymnasium", "h5py", "pettingzoo"],
    # xuance's agents import wandb at the top; mpe2's scenarios import pygame
    "xuance": ["xuance", "wandb", "pygame", "gymnasium", "pettingzoo", "mpe2", "tensorboard", "h5py"],
    # not ray[default]: the dashboard is for placing runs on a Ray cluster, not for a local run
    "ray": ["ray[rllib]", "pyarrow", "gymnasium", "pettingzoo", "mpe2"],
    "jumanji": ["jumanji", "optax", "dm-haiku", "distrax", "rlax", "omegaconf", "gymnasium"],
    # tianshou imports numba at the top (its buffers); llvmlite alone is 57 MiB: a part of its own
    "numba": ["numba", "llvmlite"],
    # CleanRL's dqn_atari: the ROMs come with ale-py; opencv is the large one
    "atari": ["ale-py", "opencv-python-headless==4.11.0.86"],   # the opencv-python here, headless
}
# The whole (ray alone is 76 MiB, pyarrow 48) does not fit the 64 MiB one device call carries: parts,
# each under the budget, carried by calls one after the other into the same venv (ignored build
# outputs stay on the warm machine between calls). RLlib has no part: see --groups ray.
# Part a goes first; b, c and d leave out what a brings (the venv a was installed into is kept).
PARTS = {"a": ["core", "cleanrl", "jumanji"], "b": ["tianshou"], "c": ["xuance"], "d": ["atari"],
         "e": ["numba"]}
AFTER_A = {"b", "c", "d", "e"}
BUDGET = {"e": 62.0}   # 60.8 MiB: under the 64 MiB a call carries, alone

# on the device machine already (its CUDA builds must stay), or not wanted there
MACHINE_HAS = re.compile(r"^(torch|torchvision|triton|nvidia-(?!ml-py).*|jax|jaxlib|jax-cuda.*|numpy|scipy|"
                         r"ml-dtypes|opt-einsum|mosaic-tui)$")
# large, and not imported by the runs the check makes (the wheelhouse installs with --no-deps): video
# writing (imageio-ffmpeg), numba's compiler (only rliable's bootstrap imports it, lazily), opencv (Atari
# wrappers: the atari group brings the headless one), the TensorBoard server's gRPC, Ray's
# virtualenv, Hugging Face's xet transfers, pygame's community fork
PRUNE = re.compile(r"^(imageio-ffmpeg|llvmlite|numba|opencv-python|grpcio|virtualenv|hf-xet|pygame-ce|moviepy|"
                   r"wandb|pygame)$")  # wandb, pygame: only where a group names them (xuance, mpe2)

PLATFORM_ARGS = ["--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3",
                 "--abi", "none", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                 "--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64", "--platform", "any"]


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots: list[str]) -> dict[str, str]:
    """canonical name -> installed version, over the dependency closure of roots as installed here,
    markers evaluated for Python 3.12 on Linux."""
    env = default_environment()
    env.update(python_version="3.12", python_full_version="3.12.0", implementation_version="3.12.0")
    seen: dict[str, str] = {}
    todo = [Requirement(r) for r in roots]
    wanted_roots = {canon(r.name) for r in todo}
    done: set[tuple[str, frozenset]] = set()
    while todo:
        req = todo.pop()
        name = canon(req.name)
        if MACHINE_HAS.match(name) or (PRUNE.match(name) and name not in wanted_roots):
            continue
        key = (name, frozenset(req.extras))
        if key in done:
            continue
        done.add(key)
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:  # not in this .venv (nvidia-ml-py): the newest that fits
            seen[name] = next((spec.version for spec in req.specifier if spec.operator == "=="), "")
            continue
        seen[name] = dist.version
        for dep in dist.requires or []:
            r = Requirement(dep)
            if r.marker is None:
                todo.append(r)
                continue
            for extra in [""] + sorted(req.extras):
                if r.marker.evaluate({**env, "extra": extra}):
                    todo.append(r)
                    break
    return seen


def fetch(name: str, version: str, dest: Path, pip: list[str]) -> tuple[str, str]:
    """One package into dest: a cp312 wheel, else one built from its sdist. (name, how or error)."""
    spec = f"{name}=={version}" if version else name
    p = subprocess.run([*pip, "download", "-q", "--no-deps", "--ignore-requires-python", "--only-binary=:all:",
                        *PLATFORM_ARGS,
                        "-d", str(dest), spec], capture_output=True, text=True)
    if p.returncode == 0:
        return name, "wheel"
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        q = subprocess.run([*pip, "wheel", "-q", "--no-deps", "--ignore-requires-python", "-w", tmp, spec],
                           capture_output=True, text=True)
        if q.returncode != 0:
            return name, "FAILED: " + (p.stderr.strip().splitlines() or ["?"])[-1]
        built = list(Path(tmp).glob("*.whl"))
        if not built or not built[0].name.endswith("-none-any.whl"):
            return name, "FAILED: no cp312 wheel and its sdist builds a binary one: " + ", ".join(b.name for b in built)
        built[0].rename(dest / built[0].name)
    return name, "built from sdist"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=sorted(PARTS), help=f"a preset of groups: {PARTS}")
    ap.add_argument("--dir", help="default build/gpu-wheelhouse-<part> (or build/gpu-wheelhouse)")
    ap.add_argument("--groups", help=f"comma-separated, of {', '.join(GROUPS)}")
    ap.add_argument("--budget-mb", type=float, help="MiB the wheelhouse may take (default 60)")
    ap.add_argument("--list", action="store_true", help="print the packages and exit")
    args = ap.parse_args(argv)

    if not args.part and not args.groups:
        ap.error("--part or --groups")
    groups = PARTS[args.part] if args.part else [g for g in args.groups.split(",") if g]
    if args.budget_mb is None:
        args.budget_mb = BUDGET.get(args.part or "", 60.0)
    if not args.dir:
        args.dir = str(ROOT / "build" / (f"gpu-wheelhouse-{args.part}" if args.part else "gpu-wheelhouse"))
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        ap.error(f"unknown group(s) {unknown}; known: {list(GROUPS)}")
    per_group = {g: closure(GROUPS[g]) for g in groups}
    wanted: dict[str, str] = {}
    for pins in per_group.values():
        wanted.update(pins)
    if args.part in AFTER_A:
        in_a = {n for g in PARTS["a"] for n in closure(GROUPS[g])}
        wanted = {n: v for n, v in wanted.items() if n not in in_a}
        per_group = {g: {n: v for n, v in pins.items() if n not in in_a} for g, pins in per_group.items()}
    if args.list:
        for name, version in sorted(wanted.items()):
            print(f"{name}=={version}")
        return 0

    dest = Path(args.dir).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    with ThreadPoolExecutor(6) as pool:
        outcome = dict(pool.map(lambda nv: fetch(nv[0], nv[1], dest, pip), sorted(wanted.items())))
    failed = {n: how for n, how in outcome.items() if how.startswith("FAILED")}
    built = sorted(n for n, how in outcome.items() if how == "built from sdist")

    # sizes: per wheel, per group (a wheel counted in every group that needs it)
    files = {canon(f.name.split("-")[0]): f for f in dest.glob("*.whl")}
    size = {n: f.stat().st_size for n, f in files.items() if n in wanted}
    stale = [f for n, f in files.items() if n not in wanted]
    for f in stale:  # from an earlier build with other groups
        f.unlink()
    total = sum(size.values()) / 2**20
    print(f"wheelhouse {dest}: {len(size)} wheels, {total:.1f} MiB (budget {args.budget_mb:.0f} MiB)")
    print("largest: " + ", ".join(f"{n} {s / 2**20:.1f}" for n, s in sorted(size.items(), key=lambda x: -x[1])[:12]))
    for g, pins in per_group.items():
        print(f"  group {g}: {len(pins)} packages, {sum(size.get(n, 0) for n in pins) / 2**20:.1f} MiB")
    if built:
        print(f"built from sdists (pure Python): {', '.join(built)}")
    (dest / "manifest.json").write_text(json.dumps(
        {"groups": groups, "packages": wanted, "outcome": outcome, "mib": round(total, 1)}, indent=1))
    if failed:
        print("NO WHEEL for: " + "; ".join(f"{n}: {how}" for n, how in failed.items()), file=sys.stderr)
        return 1
    if total > args.budget_mb:
        print(f"over the budget: {total:.1f} > {args.budget_mb:.0f} MiB; leave out a group (--groups)",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
