"""Where the libraries the runs use keep their caches and configs: under the mosaic home or in
mosaic's own cache, never loose in the user's home. Real libraries (matplotlib, TextWorld with
its Inform 7 compiler) in real processes, with a HOME of the test's own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT

# the variables that would send the libraries elsewhere than a user's defaults (the suite sets
# some of them for every test: tests/conftest.py)
REDIRECTS = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "MPLCONFIGDIR",
             "INFORM_HOME", "NUMBA_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR", "MOSAIC_HOME",
             "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def user_env(home, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in REDIRECTS}
    return {**env, "HOME": str(home), "PYTHONPATH": str(ROOT), **extra}


def files_under(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_worker_keeps_matplotlibs_config_and_cache_under_the_home(tmp_path):
    """A worker whose library imports matplotlib (Jumanji's viewers draw with it): its config and
    font cache go under the mosaic home, not ~/.config/matplotlib and ~/.cache/matplotlib; so do
    torch.compile's caches."""
    user, home = tmp_path / "user", tmp_path / "mosaic-home"
    user.mkdir()
    (tmp_path / "mpl_runtime.py").write_text(textwrap.dedent("""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        def train(config, emitter):
            plt.figure().savefig("figure.png")   # the font manager's cache, built and written
            import json, os
            with open("caches.json", "w") as f:
                json.dump({k: os.environ.get(k) for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}, f)
            emitter.run_completed(step=0)
            return 0
    """))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"worker": "synthetic", "algo": "emit", "env": "none", "steps": 1}))
    code = ("import sys; from workers.sdk.worker_cli import serve; from workers.synthetic_worker import WORKER; "
            f"sys.exit(serve('t', ['--config', {str(config)!r}], WORKER, 'mpl_runtime'))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=user_env(user, MOSAIC_HOME=str(home),
                                       PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert b'"run_completed"' in proc.stdout.encode()
    assert files_under(user) == []
    assert list((home / "cache" / "matplotlib").glob("fontlist-*.json"))
    # torch.compile's caches (the temp dir by default, which is the run's own; ~/.triton) in the home too
    assert json.loads((tmp_path / "caches.json").read_text()) == {
        "TORCHINDUCTOR_CACHE_DIR": str(home / "cache" / "torchinductor"), "TRITON_CACHE_DIR": str(home / "cache" / "triton")}


@pytest.mark.skipif(__import__("importlib").util.find_spec("textworld") is None, reason="textworld is not installed")
def test_textworld_games_are_compiled_in_mosaics_cache_and_the_old_cache_is_moved_there(tmp_path):
    """TextWorld's games are compiled into ~/.cache/mosaic-tui/textworld (as the README names
    mosaic's cache), Inform 7 leaving no ~/Inform; games an earlier version compiled into
    ~/.cache/mosaic/textworld are moved there and found, not compiled again."""
    user = tmp_path / "user"
    old = user / ".cache" / "mosaic" / "textworld"
    old.mkdir(parents=True)
    (old / "coin_collector-seed7.json").write_text("{}")
    (old / "coin_collector-seed7.z8").write_bytes(b"an earlier version's game")
    code = ("from workers.sdk.llm.textworld import game_file; "
            "print(game_file('textworld-coin', 7)); print(game_file('textworld-coin', 0))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=user_env(user))
    assert proc.returncode == 0, proc.stderr[-3000:]
    cache = user / ".cache" / "mosaic-tui" / "textworld"
    assert proc.stdout.split() == [str(cache / "coin_collector-seed7.z8"), str(cache / "coin_collector-seed0.z8")]
    assert (cache / "coin_collector-seed7.z8").read_bytes() == b"an earlier version's game"   # moved, not rebuilt
    assert files_under(user) == [".cache", ".cache/mosaic-tui", ".cache/mosaic-tui/textworld",
                                 *(f".cache/mosaic-tui/textworld/coin_collector-seed{s}.{x}"
                                   for s in (0, 7) for x in ("json", "z8"))]


def test_what_a_killed_worker_leaves_in_its_temp_dir_goes_with_its_run(tmp_path):
    """The supervisor gives the worker a temp dir of the run's own inside the machine's (TMPDIR) and
    removes it once the worker's processes have ended: a worker that dies without cleaning up (W&B
    makes its wandb-media dirs at import, multiprocessing its pymp-* dirs) leaves nothing there. A
    supervisor that was SIGKILLed could not remove its own: the next one to start does."""
    machine_tmp, run_dir = tmp_path / "tmp", tmp_path / "run"
    machine_tmp.mkdir()
    run_dir.mkdir()
    # a supervisor SIGKILLed before it could remove its run's temp dir, and one that lives
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (machine_tmp / f"mosaic-run-{gone.pid}-abcdefgh" / "pymp-x").mkdir(parents=True)
    (machine_tmp / f"mosaic-run-{os.getpid()}-abcdefgh").mkdir()
    worker = ("import os, tempfile; d = tempfile.mkdtemp('wandb-media'); open(os.path.join(d, 'x'), 'w').close(); "
              "print(d, flush=True); os.kill(os.getpid(), 9)")
    proc = subprocess.run([sys.executable, "-m", "daemon.shim", str(run_dir), "--", sys.executable, "-c", worker],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TMPDIR": str(machine_tmp), "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    made = (run_dir / "events.jsonl").read_text().strip()
    assert made.startswith(str(machine_tmp / "mosaic-run-")) and made.endswith("wandb-media")
    assert json.loads((run_dir / "exit.json").read_text())["signal_name"] == "SIGKILL"
    # its own went with it, the dead supervisor's too; a live one's is left to it
    assert [p.name for p in machine_tmp.iterdir()] == [f"mosaic-run-{os.getpid()}-abcdefgh"]


def test_tensorboard_keeps_its_server_info_in_the_given_dir_not_the_machines_tmp(tmp_path):
    """`mosaic tensorboard` starts TensorBoard with a temp dir in the home: its .tensorboard-info
    folder (which it never removes, a killed server's info file in it) is not left in /tmp."""
    from mosaic_tui import tensorboard as tb
    logs, own_tmp = tmp_path / "logs", tmp_path / "home" / "tensorboard" / ".tmp"
    logs.mkdir()
    port = tb.free_port()
    proc = tb.launch(f"run:{logs}", port, own_tmp)
    try:
        assert tb.wait_http(port, timeout=120)
        info = own_tmp / ".tensorboard-info" / f"pid-{proc.pid}.info"
        assert info.exists() or list(own_tmp.glob(".tensorboard-info/pid-*.info")), list(own_tmp.rglob("*"))
        assert not os.path.exists(f"/tmp/.tensorboard-info/pid-{proc.pid}.info")
    finally:
        proc.kill()
        proc.wait(30)
