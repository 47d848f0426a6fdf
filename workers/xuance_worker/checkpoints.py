"""The XuanCe worker's training checkpoints: ``checkpoints/<name>/`` holds XuanCe's model, the
metadata evaluation rebuilds the same networks from (``mosaic_checkpoint.json``: agent count,
parameter sharing, spaces, params) and the resume state (resume.py) that makes every training
checkpoint one a stopped run continues from.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any

from workers.sdk.descriptor import dist_version
from workers.sdk.packages import upstream
from workers.sdk.rundir import CHECKPOINT_DIR, CHECKPOINT_META, periodic_checkpoint_saved, write_manifest
from workers.sdk.stop import Stopped
from workers.sdk.telemetry import Emitter
from workers.xuance_worker.resume import RESUME_STATE, save_resume_state
from workers.xuance_worker.run_setup import PERIODIC_PREFIX, xuance_params


def checkpoint_meta(config: dict[str, Any], agent, family: str, phase: dict[str, Any],
                    multi_agent: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "worker": "xuance", "algo": config["algo"], "xuance_agent": agent.config.agent,
        "family": family, "env": config["env"], "env_id": phase["env_id"], "env_kwargs": phase["env_kwargs"],
        "step": int(agent.current_step), "seed": config["seed"],
        "observation_space": str(agent.observation_space), "action_space": str(agent.action_space),
        "params": xuance_params(config["params"]), "upstream": upstream("xuance"),
        "mosaic_version": dist_version("mosaic-tui"), "saved_at": time.time(),
    }
    if multi_agent:
        meta.update(n_agents=int(agent.n_agents), agent_keys=list(agent.agent_keys),
                    parameter_sharing=bool(agent.use_parameter_sharing),
                    training_mode=config["params"].get("training_mode"))
    return meta


class Checkpoints:
    """Saves models into checkpoints/<name>/ with their metadata, and says so on the wire.

    Every checkpoint of a training run is a resume checkpoint: RESUME_STATE beside the model. It is
    written into ``checkpoints/.<name>.tmp`` and renamed into place whole, so a crash mid-save
    leaves no half checkpoint under its name."""

    def __init__(self, emitter: Emitter, config: dict[str, Any], agent, family: str, multi_agent: bool):
        self.emitter = emitter
        self.config = config
        self.agent = agent
        self.family = family
        self.multi_agent = multi_agent
        self.phase: dict[str, Any] = {}
        self.phase_index = 0

    def save(self, name: str, model_name: str, manifest: bool = False) -> str:
        """Save, announce and return the model's path (relative to the run directory); ``manifest``:
        write the checkpoint's manifest too (a periodic one, for the daemon to continue from)."""
        folder = os.path.join(CHECKPOINT_DIR, name)
        scratch = os.path.join(CHECKPOINT_DIR, f".{name}.tmp")
        shutil.rmtree(scratch, ignore_errors=True)
        # its own folder per checkpoint: XuanCe saves obs_rms.npy beside the model
        self.agent.save_model(model_name=model_name, model_path=os.path.abspath(scratch))
        meta = checkpoint_meta(self.config, self.agent, self.family, self.phase, self.multi_agent)
        with open(os.path.join(scratch, CHECKPOINT_META), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2)
        save_resume_state(os.path.join(scratch, RESUME_STATE), self.agent, self.phase_index)
        shutil.rmtree(folder, ignore_errors=True)   # a continued run saving a step again
        os.replace(scratch, folder)
        path = os.path.join(folder, model_name)  # relative to the run directory
        self.emitter.checkpoint_saved(path, int(self.agent.current_step))
        if manifest and name.startswith(PERIODIC_PREFIX):   # on the way: the home's keep_checkpoints too
            periodic_checkpoint_saved(folder, int(self.agent.current_step), PERIODIC_PREFIX)
        elif manifest:
            write_manifest(folder, int(self.agent.current_step))
        return path

    def stop(self, step: int) -> None:
        """The stop's checkpoint (its manifest: Stopped.after), then Stopped to end the run."""
        def save() -> str:
            return os.path.abspath(os.path.dirname(self.save(f"stop_{step}", f"model_step_{step}.pth")))
        raise Stopped.after(save, step)
