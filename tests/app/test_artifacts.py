"""The run's Artifacts tab with a real CleanRL run: checkpoints, videos and
TensorBoard logs with their full paths, and `E`, which evaluates a checkpoint
with frames in a new run."""
from __future__ import annotations

import pytest

from daemon import protocol as P
from tests.app.conftest import screen_text, wait_until

pytestmark = pytest.mark.anyio


async def test_artifacts_list_and_evaluate_a_checkpoint(daemon, mosaic):
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.screens.run import RunScreen
    from mosaic_tui.widgets.artifacts_view import ArtifactsView
    rid = mosaic.submit("--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "1024",
                        "--set", "num-steps=128", "--set", "save-model=true", "--set", "capture-video=true",
                        "--name", "crl")
    mosaic.run("wait", rid, "--timeout", "300", check=True)
    run_dir = daemon.run_dir(rid)
    checkpoint = run_dir / "checkpoints" / "ppo.cleanrl_model"
    videos = sorted(run_dir.glob("videos/*/*.mp4"))
    boards = [p.parent for p in run_dir.glob("tensorboard/*/events.out.tfevents*")]
    assert checkpoint.is_file() and videos and boards

    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: rid in app.link.runs and app.link.connected, what="the run listed")
        app.open_run(rid)
        from mosaic_tui.screens.run import RunScreen
        await wait_until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.query(ArtifactsView),
                         what="the run's screen")
        await pilot.press("5")
        await wait_until(pilot, lambda: len(app.screen.query_one(ArtifactsView).artifacts) >= 3,
                         what="the artifacts listed")
        view = app.screen.query_one(ArtifactsView)
        listed = [(a.kind, a.path) for a in view.artifacts]
        assert listed == ([("checkpoint", checkpoint)] + [("video", v) for v in videos]
                          + [("tensorboard", b) for b in boards])
        assert view.artifacts[0].reported          # the run's own checkpoint_saved event
        assert str(checkpoint) in screen_text(app)  # the highlighted path in full
        await pilot.press("c")
        assert app.clipboard == str(checkpoint)
        await pilot.press("j")
        await pilot.press("c")
        assert app.clipboard == str(videos[0])
        await pilot.press("E")                     # a video: nothing to evaluate
        await pilot.pause(0.2)
        assert app.screen.query(ArtifactsView)
        await pilot.press("k", "E")
        await wait_until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.run_id != rid,
                         what="the evaluation run opened")
        evaluation = app.screen.run_id
        config = app.link.runs[evaluation]["config"]
        assert config["mode"] == "eval" and config["checkpoint"] == str(checkpoint)
        assert config["frames"]["enabled"] and config["env"] == "CartPole-v1" and config["algo"] == "ppo"
        assert app.link.runs[evaluation]["name"] == "crl-eval"
        await wait_until(pilot, lambda: app.link.runs[evaluation]["state"] not in (P.QUEUED, *P.ACTIVE_STATES),
                         timeout=120, what="the evaluation to end")
        record = app.link.runs[evaluation]
        assert record["state"] == P.SUCCEEDED, record.get("reason")
        assert record["summary"]["episodes"] == config["eval_episodes"]
        await pilot.press("q")
