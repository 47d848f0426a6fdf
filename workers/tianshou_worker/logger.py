"""The Tianshou logger that is the Tianshou worker's telemetry: what the trainer logs becomes events."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from tianshou.utils.logger.logger_base import BaseLogger

from workers.sdk.stop import SIGNALS, Stopped
from workers.sdk.telemetry import Emitter

SCALAR_EVERY_STEPS = 500   # env steps between two rounds of training / update scalars


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Numbers of a (nested) stats dict as 'a/b' tags; arrays, None and strings dropped."""
    out: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}/"))
        elif isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
            out[f"{prefix}{key}"] = float(value)
    return out


class TelemetryLogger(BaseLogger):
    """Tianshou's trainer logs through this: training collect stats become episode
    events (one per finished training episode) and ``train/...`` scalars, test steps
    ``test/...`` scalars (the mean test return is ``test/returns_stat/mean``),
    updates ``update/...`` (losses); epochs ``info/...``. ``save_data`` saves
    checkpoints; ``restore_data`` gives the trainer the counters of the checkpoint
    a run resumes from (``resume_from_log``).

    A stop (mosaic stop) is taken where the trainer hands over its counters at the end of an
    epoch (``save_data``): ``stop_checkpoint(epoch, env_step, update_step)`` saves the run's
    state, then ``Stopped``. The trainer, resumed from those counters, starts the next epoch:
    a continued run trains exactly the epochs that were left."""

    def __init__(self, emitter: Emitter, checkpoint_every: int = 1, restored: tuple[int, int, int] = (0, 0, 0),
                 offline: bool = False):
        super().__init__(training_interval=1, test_interval=1, update_interval=1, info_interval=1)
        self.emitter = emitter
        self.checkpoint_every = checkpoint_every
        self.restored = restored
        self.offline = offline
        self.env_step = restored[1]
        self.epoch = restored[0]
        self._scalars_at = -SCALAR_EVERY_STEPS
        self._updates_at = -SCALAR_EVERY_STEPS
        self._callback_at = -SCALAR_EVERY_STEPS
        # set by the worker: the stop's save (the path saved), and the epochs the run trains
        self.stop_checkpoint: Callable[[int, int, int], str] | None = None
        self.max_epochs: int | None = None

    @property
    def step(self) -> int:
        """The x of every event: env steps; gradient steps for an offline run."""
        return self.env_step

    def prepare_dict_for_logging(self, log_data: dict) -> dict:
        return log_data

    def write(self, step_type: str, step: int, data: dict) -> None:
        scope = step_type.split("/")[0]
        if scope == "training":
            self.env_step = step
            returns, lens = data.get("returns"), data.get("lens")
            if returns is not None and lens is not None:
                for ret, length in zip(np.asarray(returns).tolist(), np.asarray(lens).tolist()):
                    self.emitter.episode(step, ret, int(length))
            if step - self._scalars_at >= SCALAR_EVERY_STEPS:
                self._scalars_at = step
                self.emitter.scalars({f"train/{k}": v for k, v in _flat(data).items()}, step)
                self.emitter.heartbeat(step)
        elif scope == "test":
            self.emitter.scalars({f"test/{k}": v for k, v in _flat(data).items()}, self.step)
        elif scope == "update":
            if self.offline:
                self.env_step = step
            if self.step - self._updates_at >= SCALAR_EVERY_STEPS or self.offline and step % 100 == 0:
                self._updates_at = self.step
                self.emitter.scalars({f"update/{k}": v for k, v in _flat(data).items()}, self.step)
                self.emitter.heartbeat(self.step)
        elif scope == "train":   # what training callbacks write (train/eps of the epsilon decay)
            if step - self._callback_at >= SCALAR_EVERY_STEPS:
                self._callback_at = step
                self.emitter.scalars(_flat(data), step)
        elif scope == "info":
            self.epoch = step
            self.emitter.scalars({f"info/{k}": v for k, v in _flat(data).items()
                                  if k in ("best_reward", "best_score", "update_step")}, self.step)

    def finalize(self) -> None:
        self.emitter.flush()

    def save_data(self, epoch: int, env_step: int, update_step: int,
                  save_checkpoint_fn: Callable[[int, int, int], str] | None = None) -> None:
        if save_checkpoint_fn is not None and self.checkpoint_every and epoch % self.checkpoint_every == 0:
            save_checkpoint_fn(epoch, env_step, update_step)
        last = self.max_epochs is not None and epoch >= self.max_epochs
        if SIGNALS.stop_requested and self.stop_checkpoint is not None and not last:
            save = self.stop_checkpoint
            raise Stopped.after(lambda: save(epoch, env_step, update_step), self.step)

    def restore_data(self) -> tuple[int, int, int]:
        return self.restored

    @staticmethod
    def restore_logged_data(log_path: str) -> dict:
        return {}
