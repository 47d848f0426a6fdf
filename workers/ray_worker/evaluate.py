"""Eval mode: play a checkpoint's policies, each agent mapped to its own module.

No Ray: the RLModules are loaded from the checkpoint's learner state
(``learner_group/learner/rl_module``) and called in this process, one forward
pass per agent that has to act, greedily (the distribution's deterministic
action, or the module's own action for DQN). The env is built exactly as in
training (envs.make_env), with render_mode="rgb_array" when frames are on.
The checkpoint's mosaic_checkpoint.json says which agent plays which module.

Self-play checkpoints: 'main' plays one seat, the league's snapshots the other
(chosen per episode as in training, seats alternating).
"""
from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import torch

from workers.ray_worker import catalog, envs, rllib
from workers.sdk.dataset import env_recorder
from workers.sdk.frames import env_frames
from workers.sdk.rundir import CHECKPOINT_META
from workers.sdk.telemetry import Emitter


class _Episode:
    """What SelfPlayMapping reads from an episode: its id."""

    def __init__(self):
        self.id_ = uuid.uuid4().hex


def load_modules(checkpoint: Path) -> dict[str, Any]:
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule
    path = checkpoint / "learner_group" / "learner" / "rl_module"
    if not path.is_dir():
        raise FileNotFoundError(f"{checkpoint} is not an RLlib algorithm checkpoint "
                                f"(no {path.relative_to(checkpoint)})")
    multi = MultiRLModule.from_checkpoint(str(path))
    loaded = {mid: multi[mid] for mid in multi.keys()}
    for module in loaded.values():
        if isinstance(module, torch.nn.Module):
            module.eval()  # no dropout or batch-norm updates while playing
    return loaded


def to_tensor(obs) -> Any:
    if isinstance(obs, dict):
        return {k: to_tensor(v) for k, v in obs.items()}
    return torch.as_tensor(np.asarray(obs, dtype=np.float32)).unsqueeze(0)


def act(module, obs, action_space) -> Any:
    """One greedy action of one module for one observation."""
    from ray.rllib.core.columns import Columns
    from ray.rllib.utils.spaces.space_utils import unsquash_action
    with torch.no_grad():
        out = module.forward_inference({Columns.OBS: to_tensor(obs)})
        if Columns.ACTIONS in out:
            action = out[Columns.ACTIONS][0].numpy()
        else:
            dist = module.get_inference_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS])
            action = dist.to_deterministic().sample()[0].numpy()
    if hasattr(action_space, "n"):
        return int(action)
    # Modules act in [-1, 1] (RLlib's normalize_actions); the env wants its own bounds.
    return np.clip(unsquash_action(action, action_space), action_space.low, action_space.high)


def human_agent(agent: str, env: Any, emitter: Emitter):
    """``params.human_agent``'s seat (workers.sdk.control.HumanAgent), checked against the env."""
    from workers.sdk.control import HumanAgent
    if agent not in env.possible_agents:
        raise ValueError(f"params.human_agent: {agent!r} is not an agent of this env "
                         f"({', '.join(map(str, env.possible_agents))})")
    space = env.action_spaces[agent]
    if not hasattr(space, "n"):
        raise ValueError(f"params.human_agent: {agent} has {type(space).__name__} actions: a person plays "
                         f"discrete actions")
    return HumanAgent(agent, space.n, emitter)


def legal_actions(obs: Any, n: int) -> list[int]:
    """The actions the env's mask allows (PettingZoo's classic games), else all."""
    mask = obs.get("action_mask") if isinstance(obs, dict) else None
    return [i for i in range(n) if mask is None or mask[i]]


def run(config: dict[str, Any], emitter: Emitter) -> int:
    torch.set_num_threads(config["params"]["torch_threads"])
    checkpoint = rllib.checkpoint_root(config["checkpoint"])
    meta_file = checkpoint / CHECKPOINT_META
    meta = json.loads(meta_file.read_text()) if meta_file.exists() else {}
    env_id = meta.get("env", config["env"])
    policy = meta.get("policy", "shared")
    modules = load_modules(checkpoint)
    frames = env_frames(config)
    env_config = {"env": env_id, "env_kwargs": meta.get("env_kwargs", config["params"]["env_kwargs"]),
                  "policy": policy, "render_mode": "rgb_array" if frames is not None else None}
    if catalog.pettingzoo_images(env_id):  # observed as the modules were trained
        env_config["image"] = meta.get("image") or {k: config["params"][k] for k in catalog.IMAGE_DEFAULTS}
    env = envs.make_env(env_config)
    multi_agent = catalog.is_multi_agent(env_id)
    recorder = env_recorder(config)  # single-agent only: the descriptor refuses the rest
    if recorder is not None:
        env = recorder.wrap(env)
    if policy == "self_play":
        mapping = rllib.SelfPlayMapping(list(env.possible_agents), int(meta.get("league_size", 1)))
    elif multi_agent:
        mapping = rllib.StaticMapping(meta["agent_to_module"])
    else:
        mapping = None
    human = human_agent(config["params"]["human_agent"], env, emitter) if multi_agent and \
        config["params"].get("human_agent") else None
    emitter.phase("eval", step=0)
    steps = 0
    seed = int(config["seed"])
    try:
        for index in range(config["eval_episodes"]):
            episode = _Episode()
            obs, _ = env.reset(seed=seed + index)
            total, length = 0.0, 0
            agent_returns: dict[str, float] = {}
            done = False
            while not done:
                if frames is not None:
                    frames.maybe_publish(env.render)
                if multi_agent:
                    actions = {aid: human.move(steps, index, legal_actions(o, human.n))
                               if human is not None and aid == human.agent
                               else act(modules[mapping(aid, episode)], o, env.action_spaces[aid])
                               for aid, o in obs.items()}
                    obs, rewards, terminateds, truncateds, _ = env.step(actions)
                    for aid, r in rewards.items():
                        agent_returns[aid] = agent_returns.get(aid, 0.0) + float(r)
                        total += float(r)
                    if human is not None and human.agent in actions:
                        human.moved(actions[human.agent], steps + 1, index, agent_returns.get(human.agent, 0.0))
                    done = terminateds.get("__all__", False) or truncateds.get("__all__", False) or not obs
                else:
                    action = act(modules["default_policy"], obs, env.action_space)
                    obs, reward, terminated, truncated, _ = env.step(action)
                    total += float(reward)
                    done = terminated or truncated
                length += 1
                steps += 1
            extra: dict[str, Any] = {}
            if multi_agent:
                extra["agents"] = agent_returns
            emitter.episode(steps, total, length, **extra)
            emitter.heartbeat(steps)
        if recorder is not None:
            recorder.finish(emitter)
        emitter.run_completed(step=steps)
    finally:
        if human is not None:
            human.close()
        env.close()
        if frames is not None:
            frames.close()
    sys.stderr.write(f"mosaic ray worker: played {config['eval_episodes']} episodes of {checkpoint}\n")
    return 0
