"""The Frames view on a run with several FastLane streams (a BALROG run's episodes in flight)."""
from __future__ import annotations

import os

import numpy as np
import pytest

pytestmark = pytest.mark.anyio


async def test_n_goes_through_the_runs_streams_and_the_header_names_them():
    """Three real rings of one run, each a flat colour: the view starts on stream 0, n shows 1,
    then 2, then 0 again, each stream's own frame; a run with one stream says nothing of streams."""
    from textual.app import App

    from mosaic_tui.widgets.frames_view import FramesView
    from workers.fastlane import layout
    from workers.fastlane.writer import FrameWriter

    run_id = f"streams-{os.getpid()}"
    single = f"single-{os.getpid()}"
    writers = [FrameWriter(run_id, stream=i) for i in range(3)] + [FrameWriter(single)]
    for i, writer in enumerate(writers):
        writer.publish(np.full((40, 60, 3), 50 * (i + 1), dtype=np.uint8))

    class FramesApp(App):
        def compose(self):
            yield FramesView(run_id, id="several")
            yield FramesView(single, id="one")

    try:
        app = FramesApp()
        async with app.run_test(size=(100, 30)) as pilot:
            view = app.query_one("#several", FramesView)
            view.focus()
            seen = []
            for _ in range(4):
                for _ in range(100):
                    await pilot.pause(0.02)
                    if view.current is not None:
                        break
                seen.append((view.stream, int(view.current[1][0, 0, 0]), str(view.header_text())))
                await pilot.press("n")
            assert [(stream, colour) for stream, colour, _ in seen] == [(0, 50), (1, 100), (2, 150), (0, 50)]
            for stream, _, header in seen:
                assert f"stream {stream} ({stream + 1} of 3, n: next)" in header, header
            one = app.query_one("#one", FramesView)
            assert one.current is not None and "stream" not in str(one.header_text())
    finally:
        for writer in writers:
            writer.close()
        layout.cleanup(run_id)
        layout.cleanup(single)
