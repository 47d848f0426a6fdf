"""The install outside this machine: the torch build chosen where pip knows only the public index,
and mosaic-tui installed as a wheel (not editable) still finding its data files.

The torch choice (scripts/builds.py) is decided from ``pip index versions``, which reads index
listings and downloads nothing: here the indexes are local listings (file://), one standing for
PyPI (torch 2.13.0, no +cpu) and one for PyTorch's CPU index, with pip's configuration (this
machine's extra indexes and wheel folder) hidden. ``nvidia-smi`` cannot exist here: a script
stands in for it, printing what the real one lists.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT

BUILDS = ROOT / "scripts" / "builds.py"
WHEEL_TAG = "cp311-cp311-manylinux_2_28_x86_64"


def _index(root: Path, *versions: str) -> str:
    """A simple index (PEP 503) at ``root`` listing torch wheels of ``versions`` (links only)."""
    page = root / "simple" / "torch"
    page.mkdir(parents=True)
    links = "\n".join(f'<a href="torch-{v}-{WHEEL_TAG}.whl">torch-{v}-{WHEEL_TAG}.whl</a><br>' for v in versions)
    (page / "index.html").write_text(f"<html><body>\n{links}\n</body></html>\n")
    return (root / "simple").as_uri()


def _choose(tmp_path: Path, what: str, pypi: str, cpu_index: str, gpu: bool = False, torch: str = "") -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "nvidia-smi"
    if gpu:
        fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)'\n")
        fake.chmod(0o755)
    elif fake.exists():
        fake.unlink()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull,   # no pip.conf: this machine's extra indexes and wheels hidden
               PIP_INDEX_URL=pypi, PIP_DISABLE_PIP_VERSION_CHECK="1", MOSAIC_TORCH_CPU_INDEX=cpu_index,
               TORCH=torch, PATH=os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"]))
    out = subprocess.run([sys.executable, str(BUILDS), what], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_the_public_index_alone_gets_the_cpu_build_from_pytorchs_index(tmp_path):
    pypi = _index(tmp_path / "pypi", "2.12.0", "2.13.0")
    cpu = _index(tmp_path / "cpu", "2.13.0+cpu")
    assert _choose(tmp_path, "torch", pypi, cpu) == f"--extra-index-url {cpu} torch==2.13.0+cpu"
    assert _choose(tmp_path, "jax", pypi, cpu) == "jax[cpu]==0.7.1"


def test_without_pytorchs_index_the_plain_wheel_is_the_fallback(tmp_path):
    pypi = _index(tmp_path / "pypi", "2.13.0")
    unreachable = (tmp_path / "no-such-index").as_uri()
    assert _choose(tmp_path, "torch", pypi, unreachable) == "torch==2.13.0"
    explained = _choose(tmp_path, "explain", pypi, unreachable)
    assert "not reachable" in explained and "runs on the CPU too" in explained


def test_an_index_that_offers_the_cpu_build_is_used_first(tmp_path):
    """As on this machine, whose wheel folder holds torch 2.13.0+cpu."""
    pypi = _index(tmp_path / "pypi", "2.13.0", "2.13.0+cpu")
    assert _choose(tmp_path, "torch", pypi, (tmp_path / "none").as_uri()) == "torch==2.13.0+cpu"


def test_a_machine_with_an_nvidia_gpu_gets_the_cuda_builds(tmp_path):
    pypi = _index(tmp_path / "pypi", "2.13.0", "2.13.0+cpu")
    cpu = _index(tmp_path / "cpu", "2.13.0+cpu")
    assert _choose(tmp_path, "torch", pypi, cpu, gpu=True) == "torch==2.13.0"
    assert _choose(tmp_path, "jax", pypi, cpu, gpu=True) == "jax[cuda12]==0.7.1"
    # forced either way
    assert _choose(tmp_path, "torch", pypi, cpu, gpu=True, torch="cpu") == "torch==2.13.0+cpu"
    assert _choose(tmp_path, "jax", pypi, cpu, gpu=False, torch="cuda") == "jax[cuda12]==0.7.1"


def test_a_forced_build_that_does_not_exist_is_refused_in_one_line(tmp_path):
    env = {**os.environ, "TORCH": "rocm"}
    out = subprocess.run([sys.executable, str(BUILDS), "torch"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode != 0 and out.stderr.strip() == "TORCH=rocm: choose one of cpu, cuda, plain"


def test_the_makefile_and_the_pins_follow_the_choice():
    makefile = (ROOT / "Makefile").read_text()
    assert "$$($(PY) scripts/builds.py torch)" in makefile and "$$($(PY) scripts/builds.py jax)" in makefile
    pins = (ROOT / "constraints.txt").read_text().splitlines()
    # a public version: it matches the CPU build (2.13.0+cpu) and CUDA's alike (PEP 440 ignores the label)
    assert "torch==2.13.0" in pins
    builds = (ROOT / "scripts" / "builds.py").read_text()
    assert 'TORCH = "2.13.0"' in builds and 'JAX = "0.7.1"' in builds and "jax==0.7.1" in pins


# -- a wheel, not an editable install ------------------------------------------------------------
@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """mosaic-tui built as a wheel from the tracked files and installed (no deps) into a fresh venv
    that finds the dependencies in .venv's site-packages by a plain path line: .venv's own .pth
    files (the editable install's finder among them) are not read there."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    # what a clone has: tracked files, and new ones git does not ignore (the working tree's content)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(root / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = (root / "dist").glob("mosaic_tui-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "_mosaic_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                              "--no-index", str(wheel)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    return venv, site


def test_the_wheel_carries_the_files_the_code_reads(installed, tmp_path):
    venv, site = installed
    code = textwrap.dedent("""
        import mosaic_tui, workers.cleanrl_worker
        from mosaic_tui import themes
        print(mosaic_tui.__file__)
        print(" ".join(t.name for t in themes.load()[0]))
    """)
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": ""}, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    where, names = out.stdout.splitlines()
    assert where.startswith(str(site)), f"mosaic_tui came from {where}, not the wheel"
    assert names.split() == ["mosaic-dark", "mosaic-light", "mosaic-high-contrast"]
    for worker in ("cleanrl", "jumanji", "xuance"):
        assert (site / "workers" / f"{worker}_worker" / "sitedir" / "sitecustomize.py").is_file(), worker
    assert (site / "mosaic_tui" / "app.tcss").is_file()


def test_the_installed_mosaic_answers_and_opens_its_first_screen(installed, tmp_path):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    from tests.app.test_e2e_tmux import Tmux

    venv, _ = installed
    mosaic = venv / "bin" / "mosaic"
    env = {**os.environ, "PYTHONPATH": ""}
    out = subprocess.run([str(mosaic), "--help"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert out.returncode == 0 and "submit" in out.stdout, out.stderr[-2000:]
    home = tmp_path / "home"
    pane = Tmux(f"mosaic-wheel-{os.getpid()}")
    try:
        pane.start(f"cd {tmp_path} && PYTHONPATH= TERM=tmux-256color {mosaic} --home {home}; "
                   "echo MOSAIC-EXITED $?; sleep 600")
        pane.wait_for("0 runs", "No runs yet", timeout=90)   # the app, and the daemon it started
        pane.keys("q")
        pane.wait_for("MOSAIC-EXITED 0", timeout=30)
    finally:
        pane.kill()
        subprocess.run([str(mosaic), "--home", str(home), "daemon", "stop"], capture_output=True, env=env,
                       timeout=60)
    log = (home / "daemon.log").read_text(errors="replace") if (home / "daemon.log").exists() else ""
    assert "Traceback" not in log, log[-2000:]
