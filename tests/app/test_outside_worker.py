"""A worker from outside this repository: docs/workers/example, installed by pip from a copy.

The example package (its own pyproject.toml and `mosaic.workers` entry point,
a descriptor that inherits nothing) is built and installed by pip, with two
broken outside packages beside it: one whose module fails to import, one whose
object does not satisfy the worker contract. The daemon lists the example with
the bundled workers and the broken two with their errors, runs the example
with telemetry and a FastLane frame, and the app's form shows its schema.

pip installs into a temporary --target directory put on PYTHONPATH, not into the
shared venv: the entry points are found the same way (their .dist-info), and
other test sessions on this venv never see the broken packages.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from daemon import protocol as P
from daemon.protocol import decode_frame as decode
from tests.app.conftest import wait_until
from tests.app.test_new_run_form import SIZE, live_app, open_form, params, shows_schema
from tests.helpers import ROOT, connect, wait_for, wait_state
from workers.fastlane import layout

EXAMPLE = ROOT / "docs" / "workers" / "example"

BROKEN = {
    # the module raises at import (a missing dependency, say)
    "mosaic-broken-import": ("mosaic_broken_import", "broken_import",
                             "import not_a_module_anywhere_42\nWORKER = None\n"),
    # imports fine, but the object lacks schema() and validate()
    "mosaic-bad-descriptor": ("mosaic_bad_descriptor", "bad_descriptor",
                              "class Half:\n    name = 'bad_descriptor'\n"
                              "    def metadata(self): return {'name': self.name, 'available': True}\n"
                              "    def capabilities(self): return {'algorithms': ['x']}\n"
                              "    def command(self, config): return ['true']\n\nWORKER = Half()\n"),
}


def _broken_package(root: Path, dist: str, module: str, entry: str, source: str) -> Path:
    path = root / dist
    (path / module).mkdir(parents=True)
    (path / module / "__init__.py").write_text(source)
    (path / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{dist}"\nversion = "0.1.0"\n\n'
        f'[project.entry-points."mosaic.workers"]\n{entry} = "{module}:WORKER"\n\n'
        f'[tool.setuptools]\npackages = ["{module}"]\n')
    return path


@pytest.fixture(scope="module")
def outside():
    """pip-installed copies of the example and of the broken packages, on PYTHONPATH."""
    root = Path(tempfile.mkdtemp(prefix="mosaic-outside-"))
    try:
        sources = [shutil.copytree(EXAMPLE, root / "example", ignore=shutil.ignore_patterns("*.egg-info", "build"))]
        sources += [_broken_package(root, dist, *rest) for dist, rest in BROKEN.items()]
        target = root / "site"
        # offline: the build backend (setuptools) is in the venv; nothing is downloaded
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                              "--no-build-isolation", "--quiet", "--target", str(target), *map(str, sources)],
                             capture_output=True, text=True, timeout=300)
        if pip.returncode != 0:
            pytest.skip(f"pip cannot install the example offline here: {pip.stderr.strip()[-300:]}")
        assert (target / "mosaic_example_worker" / "cli.py").exists()
        before = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), before) if p)
        try:
            yield target
        finally:
            if before is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = before
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_outside_workers_are_listed_and_the_example_runs(outside, daemon, mosaic):
    listing = json.loads(mosaic.run("workers", "--all", "--json", check=True).stdout)
    by_name = {w["name"]: w for w in listing}
    example = by_name["example"]
    assert example["available"] and "error" not in example
    assert example["capabilities"]["algorithms"] == ["random"] and example["upstream"] == "gymnasium"
    # each broken package: listed, not available, one error saying what is wrong
    assert by_name["broken_import"]["available"] is False
    assert "not_a_module_anywhere_42" in by_name["broken_import"]["error"]
    bad = by_name["bad_descriptor"]
    assert bad["available"] is False
    assert "does not satisfy the mosaic worker contract" in bad["error"]
    assert "schema()" in bad["error"] and "validate()" in bad["error"]
    # ... without disturbing the others
    for name in ("synthetic", "cleanrl"):
        assert by_name[name]["available"] and "error" not in by_name[name], by_name[name]
    # the plain `mosaic workers` table: the example with its upstream, the broken ones with their errors
    table = {line.split()[0]: line for line in mosaic.run("workers", check=True).stdout.splitlines()[1:]}
    assert "gymnasium 1." in table["example"] and " yes " in table["example"]
    assert "does not satisfy" in table["bad_descriptor"] and " no " in table["bad_descriptor"]

    schema = json.loads(mosaic.run("schema", "example", "random", check=True).stdout)
    assert set(schema["properties"]) == {"episodes_per_log", "push_left"}
    # the descriptor's own validation, at submit: one line naming the field
    bad_submit = mosaic.run("submit", "--worker", "example", "--algo", "random", "--env", "CartPole-v1",
                            "--steps", "100", "--set", "push_left=2")
    assert bad_submit.returncode != 0 and "push_left" in bad_submit.stderr
    # a user types the algorithm in another case: the base class's resolve_algo, for a plain object
    run_id = mosaic.submit("--worker", "example", "--algo", "RANDOM", "--env", "CartPole-v1", "--steps", "3000",
                           "--set", "episodes_per_log=2")
    run = wait_state(daemon, run_id, [P.SUCCEEDED, P.FAILED], timeout=120)
    assert run["state"] == P.SUCCEEDED, run
    assert run["config"]["algo"] == "random"
    with connect(daemon) as c:
        events = c.call(P.EVENTS, run=run_id, **{"from": 0})["events"]  # 3000 steps: one page
    kinds = [e["type"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_completed"
    episodes = [e for e in events if e["type"] == "episode"]
    assert len(episodes) >= 10 and all(e["length"] >= 8 for e in episodes)  # CartPole under a random policy
    assert any(e["type"] == "scalar" and e["tag"] == "random/mean_return" for e in events)


def test_the_example_publishes_frames(outside, daemon):
    with connect(daemon) as c:
        run = c.call(P.SUBMIT, config={"worker": "example", "algo": "random", "env": "CartPole-v1",
                                       "steps": 50_000_000, "frames": {"enabled": True, "fps": 20, "max_dim": 200}})
        wait_state(daemon, run["id"], P.RUNNING)
        wait_for(lambda: layout.run_files(run["id"]), 60, what="the run's FastLane segment")
        c.call(P.FRAMES, run=run["id"], fps=10, max_dim=64)
        frame = next(params for method, params in c.notifications(timeout=30) if method == P.NOTIFY_FRAME)
        pixels = decode(frame)
        assert pixels.shape == (frame["height"], frame["width"], 3) and max(pixels.shape[:2]) <= 64
        assert pixels.std() > 0  # CartPole's cart and pole on white, not a blank frame
        c.call(P.CANCEL, run=run["id"])
        wait_state(daemon, run["id"], [P.CANCELLED])


@pytest.mark.anyio
async def test_the_app_form_shows_the_outside_workers_schema(outside, daemon):
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        assert "example" in screen.field("worker").choices()
        screen.field("worker").set_value("example")
        await pilot.pause()
        await wait_until(pilot, lambda: shows_schema(screen, "example", "random"), what="the example's schema")
        assert params(screen) == {"episodes_per_log": "5", "push_left": "0.5"}
        assert screen.field("algo").choices() == ["random"]


@pytest.mark.anyio
async def test_the_app_workers_screen_lists_the_broken_packages_with_their_errors(outside, daemon):
    from textual.widgets import DataTable

    from mosaic_tui.screens.workers import WorkersScreen
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.link.connected, what="connected")
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, WorkersScreen) and app.screen.worker_list,
                         what="the workers screen and its list")
        table = app.screen.query_one(DataTable)
        rows = {str(table.get_row_at(i)[0]): [str(c) for c in table.get_row_at(i)] for i in range(table.row_count)}
        assert rows["example"][3] == "yes" and rows["example"][4] == "random"
        assert rows["bad_descriptor"][3] == "no" and "does not satisfy" in rows["bad_descriptor"][4]
        assert rows["broken_import"][3] == "no" and "not_a_module_anywhere_42" in rows["broken_import"][4]
        assert rows["cleanrl"][3] == "yes"
