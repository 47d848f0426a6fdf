"""Tags and notes in the app, against a real daemon: `#` and `o` edit them, `/tag:NAME` filters."""
from __future__ import annotations

import json

import pytest

from daemon import protocol as P
from tests.app.conftest import screen_text, wait_until
from tests.helpers import wait_state

pytestmark = pytest.mark.anyio


async def test_edit_tags_and_note_in_the_app_then_filter_by_tag(daemon, mosaic):
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.screens.run import RunScreen
    first = mosaic.synthetic(5, "rate=0", name="first")
    second = mosaic.synthetic(5, "rate=0", name="second")
    wait_state(daemon, first, P.SUCCEEDED)
    wait_state(daemon, second, P.SUCCEEDED)
    mosaic.run("tag", "second", "+old", check=True)
    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(160, 30)) as pilot:
        table = app.screen.table
        await wait_until(pilot, lambda: {first, second} <= set(table.visible_ids), what="runs listed")
        assert table.select_run(first)
        await pilot.press("#")
        for key in ["space", *"baseline", "space", *"lr"]:   # appended to the (empty) tags
            await pilot.press(key)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.link.runs[first].get("tags") == ["baseline", "lr"],
                         what="the daemon's record with the new tags")
        assert mosaic.show("first")["tags"] == ["baseline", "lr"]
        # the run screen: `o` writes the note, `#` removes a tag by deleting its word
        app.open_run(second)
        await wait_until(pilot, lambda: isinstance(app.screen, RunScreen), what="the run screen")
        await pilot.press("o")
        for key in "keep":
            await pilot.press(key)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.link.runs[second].get("note") == "keep", what="the note")
        await pilot.press("#")
        for _ in range(3):
            await pilot.press("backspace")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.link.runs[second].get("tags") == [], what="the tag removed")
        await pilot.press("escape")
        await pilot.press("slash")
        for key in "tag:baseline":
            await pilot.press(key)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.screen.table.visible_ids == [first]
        assert "baseline lr" in screen_text(app)  # the tags column
    assert mosaic.show("second")["note"] == "keep"


async def test_tensorboard_from_the_palette_for_the_highlighted_run(daemon, mosaic, tmp_path, monkeypatch):
    import os
    import signal
    import urllib.request

    from mosaic_tui.app import MosaicApp
    run_id = mosaic.synthetic(20, "rate=0", "tags=1", name="boarded")
    wait_state(daemon, run_id, P.SUCCEEDED)
    # started from a directory holding a file named like a standard module: the process the
    # palette starts must not import it (it would, were the working directory first on sys.path)
    (tmp_path / "inspect.py").write_text("raise SystemExit('the working directory shadowed inspect')\n")
    monkeypatch.chdir(tmp_path)
    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until(pilot, lambda: run_id in app.screen.table.visible_ids, what="the run listed")
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"tensorboard for boarded")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.tensorboard_url, timeout=90, what="TensorBoard's URL")
    port = int(app.tensorboard_url.rstrip("/").rsplit(":", 1)[1])
    try:
        with urllib.request.urlopen(app.tensorboard_url + "data/runs", timeout=10) as r:
            assert [name.split("/")[0] for name in json.loads(r.read())] == ["boarded"]
    finally:
        import psutil  # the TensorBoard it started (its own session) on that port
        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info["cmdline"] or []
            if "--logdir_spec" in cmd and str(port) in cmd:
                os.killpg(proc.pid, signal.SIGTERM)
