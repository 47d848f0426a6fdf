"""Live frames from a worker's env into FastLane: render, tile, scale, publish, rate-limited.

    frames = env_frames(config)                  # None when the run has frames off
    ...
    if frames is not None:
        frames.maybe_publish(env.render)         # renders only when a frame is due

Every worker that renders a gymnasium-style env uses this: the rate limit is
asked before rendering (rendering costs more than publishing), the first
``grid`` images of a vector env are tiled into one frame, FrameWriter scales it
to ``max_dim``, and an env that cannot render turns frames off with one line on
stderr instead of stopping the training.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable


class EnvFrames:
    """One FastLane stream of a run: stream 0, the one every app shows first, or another for a
    worker that plays several episodes at once (one stream each)."""

    def __init__(self, run_id: str, fps: float, max_dim: int, grid: int = 1, stream: int = 0):
        from workers.fastlane.writer import FrameWriter  # numpy: worker processes only

        self.writer = FrameWriter(run_id, stream=stream, max_dim=max_dim, max_fps=fps)
        self.grid = grid
        self.failed = False

    def maybe_publish(self, render: Callable[..., Any], *args: Any) -> None:
        """Publish what ``render(*args)`` returns (an RGB array, or a list of them:
        the first ``grid`` are tiled), if the rate limit lets a frame through."""
        if self.failed or not self.writer.due():
            return
        try:
            rendered = render(*args)
            # one image (H, W, 3), or a list / stacked array of a vector env's
            images = [rendered] if getattr(rendered, "ndim", None) == 3 else list(rendered)[:self.grid]
            images = [image for image in images if image is not None]
            if images:
                from workers.fastlane.writer import tile

                self.writer.publish(tile(images) if len(images) > 1 else images[0])
        except Exception as exc:  # noqa: BLE001 -- an env that cannot render must not stop training
            self.failed = True
            self.close()
            sys.stderr.write(f"mosaic: frames disabled: {exc!r}\n")

    def close(self) -> None:
        """Close the FastLane writer (its shared memory goes with it)."""
        self.writer.close()


def frames_request(config: dict[str, Any]) -> dict[str, Any] | None:
    """What EnvFrames needs, if frames are on and the run has an id (the daemon's
    config.json has it; a child process finds it in MOSAIC_RUN_ID)."""
    run_id = config.get("run_id") or os.environ.get("MOSAIC_RUN_ID")
    frames = config["frames"]
    if not frames["enabled"] or not run_id:
        return None
    return {"run_id": run_id, "fps": frames["fps"], "max_dim": frames["max_dim"], "grid": frames["grid"]}


def env_frames(config: dict[str, Any], stream: int = 0) -> EnvFrames | None:
    """The run's EnvFrames on ``stream``, or None when it has frames off."""
    request = frames_request(config)
    return None if request is None else EnvFrames(**request, stream=stream)


def publishing(env: Any, frames: EnvFrames) -> Any:
    """``env`` (a gymnasium env made with ``render_mode="rgb_array"``) wrapped so that its
    steps publish live frames: for a learner that steps its envs itself (a vector env of
    them), wrap the first one. ``render()`` passes through every wrapper to the env
    underneath, so a preprocessed env (84x84 grey) still shows its rgb screen."""
    import gymnasium as gym

    class PublishFrames(gym.Wrapper):
        def step(self, action):
            result = self.env.step(action)
            frames.maybe_publish(self.env.render)
            return result

    return PublishFrames(env)
