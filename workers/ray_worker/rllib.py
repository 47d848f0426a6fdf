"""The RLlib side of the worker: Ray's lifetime, the AlgorithmConfig, training, telemetry.

Imported only in the worker process (and, for ``EpisodeCallbacks`` and the
mapping functions, in env-runner actors, which unpickle them by reference).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME
from ray.tune.registry import register_env

from workers.ray_worker import catalog, envs, modules
from workers.sdk.rundir import CHECKPOINT_META

EPISODES_KEY = "mosaic_episodes"          # per-episode records the callback logs (item_series)
SELF_PLAY_WIN_KEY = "self_play_main_win_rate"
MAIN = "main"
PLACEMENT_FILE = "ray_placement.json"
# The longest path Ray binds a Unix socket to is <temp_dir>/session_<date>_<time>_<us>_<pid>/sockets/plasma_store
# (41 + 21 characters past the temp dir, with a 7-digit pid); sun_path holds 107 bytes.
RAY_SOCKET_SUFFIX = 72
SUN_PATH_MAX = 107
RESULTS_DIR = "ray_results"   # RLlib's own logs of the run (result.json, progress.csv), in the run directory


def private_token() -> None:
    """A private Ray's token in this process's environment, where the user keeps none.

    Ray 2.60 turns token authentication on for a new local cluster and, finding no token,
    writes one to ~/.ray/auth_token for good. A run's private Ray is its own: a token made
    here and inherited through the environment by Ray's processes keeps authentication on
    and writes nothing, to the home or to the run's files. A token of the user's (the
    variables, or the default file) is left to Ray."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return
    if (Path.home() / ".ray" / "auth_token").exists():
        return
    os.environ["RAY_AUTH_TOKEN"] = os.urandom(24).hex()


# -- Ray's lifetime -----------------------------------------------------------------------
class RayRuntime:
    """Starts a private Ray, or joins a cluster; ``stop`` undoes exactly what ``start`` did."""

    def __init__(self, params: dict[str, Any], run_dir: Path, run_id: str):
        self.address = params["address"]
        self.num_cpus = params["num_cpus"]
        self.run_dir = run_dir
        self.run_id = run_id
        self.temp_link: Path | None = None
        self.started = False

    @property
    def private(self) -> bool:
        return self.address == ""

    def temp_dir(self) -> str:
        """Ray's temp dir: ``<run dir>/ray``, reached through a short symlink in /tmp
        when that path is too long for Ray's Unix sockets (the files stay in the run dir)."""
        real = self.run_dir / "ray"
        real.mkdir(exist_ok=True)
        if len(str(real)) + RAY_SOCKET_SUFFIX <= SUN_PATH_MAX:
            return str(real)
        remove_dangling_links()
        link = Path("/tmp") / f"{LINK_PREFIX}{self.run_id}"
        if len(str(link)) + RAY_SOCKET_SUFFIX > SUN_PATH_MAX:  # a run id longer than the daemon's ULIDs
            link = Path("/tmp") / f"{LINK_PREFIX}{hashlib.sha1(self.run_id.encode()).hexdigest()[:12]}"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(real)
        self.temp_link = link
        return str(link)

    def start(self) -> None:
        # RLlib's Algorithm is a Tune Trainable: without a storage context it makes its log
        # directory (result.json, progress.csv) in ~/ray_results, one per run, for ever. A
        # run's files belong in its run directory.
        from ray.tune.trainable import trainable
        trainable.DEFAULT_STORAGE_PATH = str(self.run_dir / RESULTS_DIR)
        if self.private:
            private_token()
            try:
                self._start_private()
            except BaseException:
                self.remove_link()   # no stop() follows a start that failed: its link would dangle
                raise
        else:
            # A cluster's own settings win: no num_cpus, no temp dir of ours.
            ray.init(address=self.address, log_to_driver=True, logging_level="WARNING")
        self.started = True

    def _start_private(self) -> None:
        """ray.init of the run's own Ray, tried again once when its node does not register in time.

        Ray gives the raylet a fixed 30 s to register with the GCS (ray/_private/node.py); on a
        login node whose cores are all busy (a CI run's other tests, JAX compiling beside it) a
        first start can take longer, and the run would fail before it trained. The processes
        that attempt left (its gcs_server and raylet, started under this temp dir) are killed
        before the second."""
        temp_dir = self.temp_dir()
        for attempt in range(1, PRIVATE_START_TRIES + 1):
            try:
                ray.init(num_cpus=self.num_cpus, include_dashboard=False, _temp_dir=temp_dir,
                         log_to_driver=True, logging_level="WARNING")
                return
            except Exception as exc:
                if STARTUP_TIMEOUT not in str(exc) or attempt == PRIVATE_START_TRIES:
                    raise
                left = kill_processes_under(temp_dir, self.run_dir / "ray")
                print(f"Ray's node did not start within Ray's 30 s ({exc}); {left} of its processes "
                      f"stopped, starting it again", file=sys.stderr, flush=True)

    def stop(self, cancelled: bool = False) -> None:
        """Disconnect; a private Ray's processes (gcs_server, raylet, workers) are stopped by it.

        After a cancel, the supervisor has sent SIGTERM to Ray's processes as
        well and gives the run a grace period before SIGKILL. ray.shutdown()
        would SIGTERM each kind of process again and give it a second, one
        kind after the other, then wait 5 s for the dead raylet while
        disconnecting: longer than the grace on a busy machine. So a cancelled
        private Ray is SIGKILLed at once (Ray's own Node.kill_all_processes,
        without the graceful round) and the worker exits without disconnecting
        (the shared guard, workers/sdk/guard.py, ends it by the signal itself, skipping Ray's atexit shutdown).
        """
        try:
            if not (self.started and ray.is_initialized()):
                return
            node = getattr(ray._private.worker, "_global_node", None)
            if cancelled and self.private and node is not None:
                node.kill_all_processes(check_alive=False, allow_graceful=False, wait=True)
                return
            ray.shutdown()
        finally:
            self.remove_link()

    def remove_link(self) -> None:
        """Also called by the worker's watchdog when a shutdown hangs."""
        if self.temp_link is not None:
            try:
                self.temp_link.unlink()
            except FileNotFoundError:
                pass
            self.temp_link = None


LINK_PREFIX = "mosaic-ray-"
# what ray.init raises when the node's raylet did not register with the GCS in time
STARTUP_TIMEOUT = "timed out during startup"
PRIVATE_START_TRIES = 2


def kill_processes_under(*temp_dirs: str | Path) -> int:
    """SIGKILL this process's descendants whose command line names one of these dirs (a failed
    start's gcs_server and raylet, their logs under Ray's temp dir); how many there were."""
    import psutil
    marks = [str(d) for d in temp_dirs]
    hit = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any(mark in " ".join(child.cmdline()) for mark in marks):
                child.kill()
                hit.append(child)
        except psutil.Error:
            pass
    psutil.wait_procs(hit, timeout=10)
    return len(hit)


def remove_dangling_links() -> None:
    """Links of runs killed before they could remove theirs (SIGKILL): their run dir is gone."""
    for link in Path("/tmp").glob(f"{LINK_PREFIX}*"):
        if link.is_symlink() and not link.exists():
            try:
                link.unlink()
            except OSError:
                pass


# -- policy mapping ---------------------------------------------------------------------
class StaticMapping:
    """agent id -> module id, from a fixed table (shared, independent, shared_value)."""

    def __init__(self, table: dict[str, str]):
        self.table = dict(table)

    def __call__(self, agent_id, episode=None, **kwargs):
        return self.table[agent_id]


class SelfPlayMapping:
    """Per episode: one side is the learner ('main'), the other a league snapshot.

    A side is one player of a two-player game, or every agent of one team of a
    two-team game (MultiGrid's green_0, green_1 vs blue_0, blue_1). Both choices
    are derived from the episode id with crc32 (not hash(), which is salted per
    process), so the agents of one episode agree, whichever process asks; sides
    alternate between episodes so main plays both.
    """

    def __init__(self, sides: list[list[str]], league_size: int):
        self.side_of = {agent: index for index, side in enumerate(sides) for agent in side}
        self.league_size = league_size

    def __call__(self, agent_id, episode=None, **kwargs):
        if episode is None:
            return MAIN
        code = zlib.crc32(str(episode.id_).encode())
        main_side = code % 2
        if self.side_of[agent_id] == main_side:
            return MAIN
        return snapshot_id((code // 2) % self.league_size)


def snapshot_id(slot: int) -> str:
    return f"snapshot_{slot}"


# -- callbacks ------------------------------------------------------------------------------
class EpisodeCallbacks(RLlibCallback):
    """Logs one record per finished episode, for the worker's episode events.

    Runs in the env runners (the worker process or remote actors, possibly on
    other nodes), so it cannot write telemetry itself: the records travel back
    in the training result as an item series under env_runners/mosaic_episodes.
    """

    def on_episode_end(self, *, episode, prev_episode_chunks=None, metrics_logger=None, env_index=0, **kwargs):
        chunks = [*(prev_episode_chunks or []), episode]
        # The length is the last chunk's timestep counter (env steps since reset),
        # not the sum of the chunks' lengths: with the env runner in this process,
        # the learner connector appends an artificial step (reward 0) to the chunks
        # it trains on, the earlier chunks of this very episode included.
        length = episode.env_t if hasattr(episode, "env_t") else episode.t
        total = float(sum(chunk.get_return() for chunk in chunks))
        record: dict[str, Any] = {"return": total, "length": int(length), "env_index": int(env_index)}
        if hasattr(episode, "agent_episodes"):  # multi-agent
            agents: dict[str, float] = {}
            for chunk in chunks:
                for aid, sa in chunk.agent_episodes.items():
                    agents[str(aid)] = agents.get(str(aid), 0.0) + float(sa.get_return())
            record["agents"] = agents
            record["modules"] = {str(aid): sa.module_id for aid, sa in episode.agent_episodes.items()}
            main_agents = [aid for aid, mid in record["modules"].items() if mid == MAIN]
            others = [mid for mid in record["modules"].values() if mid.startswith("snapshot_")]
            if main_agents and others:  # self-play: did the learner (its side) win?
                main_return = sum(agents.get(aid, 0.0) for aid in main_agents)
                metrics_logger.log_value(SELF_PLAY_WIN_KEY, 1.0 if main_return > 0 else 0.0,
                                         reduce="mean", window=100)
        metrics_logger.log_value(EPISODES_KEY, record, reduce="item_series")

    def on_episode_step(self, *, episode=None, env=None, env_index=0, **kwargs):
        frames = training_frames()
        if frames is not None and env_index == 0 and env is not None:
            frames.maybe_publish(render_first, env)


# -- live frames while training --------------------------------------------------------------
# Only the env runner in the worker process publishes (params.env_runners = 0, the default):
# a run has one FastLane writer. runtime.py sets these variables before Ray starts.
FRAMES_VAR = "MOSAIC_RAY_FRAMES"          # frames_request(config) as JSON
DRIVER_PID_VAR = "MOSAIC_RAY_DRIVER_PID"  # the worker process
_training_frames: list = []


def training_frames():
    if not _training_frames:
        request = os.environ.get(FRAMES_VAR)
        in_driver = os.environ.get(DRIVER_PID_VAR) == str(os.getpid())
        if request and in_driver:
            from workers.sdk.frames import EnvFrames
            _training_frames.append(EnvFrames(**json.loads(request)))
        else:
            _training_frames.append(None)
    return _training_frames[0]


def render_first(env):
    """The first sub-env's RGB frame of an env runner's (vector) env."""
    inner = getattr(env, "unwrapped", env)
    subs = getattr(inner, "envs", None) or getattr(env, "envs", None)
    target = subs[0] if subs else inner
    return target.render()


# -- the AlgorithmConfig ----------------------------------------------------------------
def config_class(algo: str):
    if algo == "PPO":
        from ray.rllib.algorithms.ppo import PPOConfig
        return PPOConfig
    if algo == "APPO":
        from ray.rllib.algorithms.appo import APPOConfig
        return APPOConfig
    if algo == "IMPALA":
        from ray.rllib.algorithms.impala import IMPALAConfig
        return IMPALAConfig
    if algo == "DQN":
        from ray.rllib.algorithms.dqn import DQNConfig
        return DQNConfig
    if algo == "SAC":
        from ray.rllib.algorithms.sac import SACConfig
        return SACConfig
    raise ValueError(f"unknown algorithm {algo}")


def training_kwargs(algo: str, params: dict[str, Any], multi_agent: bool) -> dict[str, Any]:
    """The algorithm's params as keyword arguments of AlgorithmConfig.training()."""
    kwargs = {k: params[k] for k in catalog.ALGO_PARAMS[algo] if k not in catalog.MAPPED_BY_HAND}
    if algo in ("DQN", "SAC"):
        buffer = "MultiAgentPrioritizedEpisodeReplayBuffer" if multi_agent else "PrioritizedEpisodeReplayBuffer"
        kwargs["replay_buffer_config"] = {"type": buffer, "capacity": params["replay_capacity"],
                                          "alpha": 0.6, "beta": 0.4}
    if algo == "DQN":
        kwargs["epsilon"] = [(0, 1.0), (params["epsilon_timesteps"], params["final_epsilon"])]
    return kwargs


def model_config_of(env_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """The default RLModules' model config: RLlib's CNN encoder for image observations
    (conv_filters null: RLlib's default filters for the image size), its MLP for the rest."""
    if catalog.observes_images(env_id):
        config: dict[str, Any] = {"conv_activation": params["conv_activation"]}
        if params["conv_filters"]:
            config["conv_filters"] = [list(layer) for layer in params["conv_filters"]]
        return config
    return {"fcnet_hiddens": list(params["fcnet_hiddens"]), "fcnet_activation": params["fcnet_activation"]}


class Setup:
    """What the worker derived from a run config: the AlgorithmConfig and the policy layout."""

    def __init__(self, run_config: dict[str, Any]):
        self.run_config = run_config
        self.algo = run_config["algo"]
        self.env_id = run_config["env"]
        self.params = run_config["params"]
        self.policy = self.params["policy"]
        self.multi_agent = catalog.is_multi_agent(self.env_id)
        self.env_config = {"env": self.env_id, "env_kwargs": self.params["env_kwargs"], "policy": self.policy}
        if catalog.pettingzoo_images(self.env_id):
            self.env_config["image"] = {k: self.params[k] for k in catalog.IMAGE_DEFAULTS}
        self.agent_to_module: dict[str, str] = {}
        self.module_ids: list[str] = []
        self.agents: list[str] = []
        self.config = self._build()

    def _build(self):
        p = self.params
        register_env(envs.ENV_NAME, envs.make_env)
        config = config_class(self.algo)()
        config.framework("torch")
        info = catalog.env_info(self.env_id) or {}
        if os.environ.get(FRAMES_VAR):
            self.env_config["render_mode"] = "rgb_array"
        if self.multi_agent or info.get("atari") or info.get("image") or info.get("family") == "jumanji" \
                or os.environ.get(FRAMES_VAR):
            # mosaic's env creator: registers the family (Atari, MultiGrid, ViZDoom, Jumanji), wraps the images,
            # renders
            config.environment(envs.ENV_NAME, env_config=self.env_config)
        else:
            config.environment(self.env_id, env_config=p["env_kwargs"])
        runner_kwargs: dict[str, Any] = dict(
            num_env_runners=p["env_runners"],
            num_envs_per_env_runner=p["envs_per_runner"],
            num_cpus_per_env_runner=p["cpus_per_env_runner"],
        )
        if p["custom_resources_per_env_runner"]:
            runner_kwargs["custom_resources_per_env_runner"] = p["custom_resources_per_env_runner"]
        if "rollout_fragment_length" in p:
            runner_kwargs["rollout_fragment_length"] = p["rollout_fragment_length"] or "auto"
        config.env_runners(**runner_kwargs)
        config.learners(num_learners=0, num_gpus_per_learner=p["num_gpus"])
        config.training(**training_kwargs(self.algo, p, self.multi_agent))
        if "min_sample_timesteps_per_iteration" in p:
            config.reporting(min_sample_timesteps_per_iteration=p["min_sample_timesteps_per_iteration"])
        config.debugging(seed=self.run_config["seed"], log_level="WARN")
        config.callbacks(EpisodeCallbacks)
        model_config = model_config_of(self.env_id, p)
        if self.multi_agent:
            self._multi_agent(config, model_config)
        else:
            config.rl_module(model_config=model_config)
            self.agent_to_module = {"default_agent": "default_policy"}
            self.module_ids = ["default_policy"]
        return config

    def _multi_agent(self, config, model_config: dict[str, Any]) -> None:
        p = self.params
        probe = envs.make_env(self.env_config)  # to read agents and spaces once, here
        try:
            self.agents = list(probe.possible_agents)
            obs_spaces = {aid: probe.observation_spaces[aid] for aid in self.agents}
            act_spaces = {aid: probe.action_spaces[aid] for aid in self.agents}
            own_dims = getattr(probe, "own_dims", {})
            state_dim = getattr(probe, "state_dim", 0)
            groups = envs.agent_groups(probe)
        finally:
            probe.close()
        turn_based = catalog.env_info(self.env_id)["kind"] == "turn_based"
        module_class = modules.masked_module_class(self.algo) if turn_based else None
        specs: dict[str, RLModuleSpec] = {}
        multi_class = None
        policies_to_train = None

        def spec_for(aid: str, **extra) -> RLModuleSpec:
            kwargs = {"observation_space": obs_spaces[aid], "action_space": act_spaces[aid]}
            if module_class is not None:
                kwargs["module_class"] = module_class
            kwargs.update(extra)
            return RLModuleSpec(**kwargs)

        if self.policy == "shared":
            kinds = sorted(set(groups.values()))
            for aid in self.agents:
                self.agent_to_module[aid] = "shared" if len(kinds) == 1 else f"shared_{groups[aid]}"
            for aid in self.agents:
                specs.setdefault(self.agent_to_module[aid], spec_for(aid))
            mapping = StaticMapping(self.agent_to_module)
        elif self.policy == "independent":
            self.agent_to_module = {aid: aid for aid in self.agents}
            specs = {aid: spec_for(aid) for aid in self.agents}
            mapping = StaticMapping(self.agent_to_module)
        elif self.policy == "self_play":
            n = p["league_size"]
            specs = {MAIN: spec_for(self.agents[0])}
            for slot in range(n):
                specs[snapshot_id(slot)] = spec_for(self.agents[0])
            groups_of = {}
            for aid in self.agents:
                groups_of.setdefault(groups[aid], []).append(aid)
            # two teams (MultiGrid): a side is a team; otherwise (two-player games) one agent each
            sides = list(groups_of.values()) if len(groups_of) == 2 and len(self.agents) > 2 else \
                [[aid] for aid in self.agents]
            mapping = SelfPlayMapping(sides, n)
            policies_to_train = [MAIN]
        elif self.policy == "shared_value":
            multi_class = modules.SharedCriticMultiRLModule
            hidden = {"fcnet_hiddens": model_config["fcnet_hiddens"],
                      "fcnet_activation": model_config["fcnet_activation"]}
            for index, aid in enumerate(self.agents):
                specs[aid] = RLModuleSpec(
                    module_class=modules.CentralCriticActor, observation_space=obs_spaces[aid],
                    action_space=act_spaces[aid],
                    model_config={**hidden, "own_dim": own_dims[aid], "agent_index": index,
                                  "num_agents": len(self.agents)})
            import gymnasium as gym
            specs[modules.CRITIC_ID] = RLModuleSpec(
                module_class=modules.SharedCritic,
                observation_space=gym.spaces.Box(-np.inf, np.inf, (state_dim + len(self.agents),), np.float32),
                action_space=act_spaces[self.agents[0]],
                model_config={**hidden, "state_dim": state_dim, "num_agents": len(self.agents)})
            self.agent_to_module = {aid: aid for aid in self.agents}
            mapping = StaticMapping(self.agent_to_module)
        else:
            raise ValueError(f"unknown policy configuration {self.policy}")

        self.module_ids = list(specs)
        config.multi_agent(policies=set(specs), policy_mapping_fn=mapping,
                           policies_to_train=policies_to_train)
        spec_kwargs: dict[str, Any] = {"rl_module_specs": specs}
        if multi_class is not None:
            spec_kwargs["multi_rl_module_class"] = multi_class
        config.rl_module(model_config=model_config, rl_module_spec=MultiRLModuleSpec(**spec_kwargs))

    def describe(self) -> dict[str, Any]:
        """What a checkpoint needs to be played back (mosaic_checkpoint.json)."""
        meta = {"algo": self.algo, "env": self.env_id, "env_kwargs": self.params["env_kwargs"],
                "policy": self.policy, "agents": self.agents, "modules": self.module_ids,
                "agent_to_module": self.agent_to_module, "league_size": self.params["league_size"],
                "seed": self.run_config["seed"]}
        if "image" in self.env_config:  # an evaluation must observe as the modules were trained
            meta["image"] = self.env_config["image"]
        return meta


# -- self-play league -----------------------------------------------------------------------
class League:
    """N frozen snapshots of 'main'; every K iterations main is copied into the oldest slot."""

    def __init__(self, algo, size: int, every: int):
        self.algo = algo
        self.size = size
        self.every = every
        self.taken = 0

    def copy_main_to(self, slots: list[str]) -> None:
        from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE
        group = self.algo.learner_group
        state = group.get_state(components=f"{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}/{MAIN}")
        main_state = state[COMPONENT_LEARNER][COMPONENT_RL_MODULE][MAIN]
        group.set_state({COMPONENT_LEARNER: {COMPONENT_RL_MODULE: {slot: main_state for slot in slots}}})
        # Frozen modules are not in the learner's results, so RLlib's own weight
        # sync after an update skips them: push them to every env runner here.
        self.algo.env_runner_group.sync_weights(from_worker_or_learner_group=group, policies=list(slots),
                                                inference_only=True, timeout_seconds=60.0)

    def fill(self) -> None:
        """At the start, the whole league is the initial learner."""
        self.copy_main_to([snapshot_id(slot) for slot in range(self.size)])

    def after_iteration(self, iteration: int) -> int | None:
        """Take a snapshot when it is due; returns the slot refreshed."""
        if iteration % self.every:
            return None
        slot = (iteration // self.every - 1) % self.size
        self.copy_main_to([snapshot_id(slot)])
        self.taken += 1
        return slot


# -- results -> telemetry ----------------------------------------------------------------------
# Subtrees of a training result that are configuration or connector timings, not metrics.
_SKIP_PREFIXES = ("config/", "env_runners/env_to_module_connector/", "env_runners/module_to_env_connector/",
                  "learners/__all_modules__/learner_connector/", "fault_tolerance/", "env_runner_group/",
                  "perf/")
_SKIP_KEYS = {"timestamp", "pid", "done", "training_iteration", "trial_id", "date", "hostname", "node_ip",
              "time_since_restore", "iterations_since_restore", "num_training_step_calls_per_iteration"}


def flatten(result: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Numeric leaves of a training result, tagged by their path ("learners/shared/policy_loss")."""
    out: dict[str, float] = {}
    for key, value in result.items():
        tag = f"{prefix}{key}"
        if isinstance(value, dict):
            if any(f"{tag}/".startswith(p) for p in _SKIP_PREFIXES):
                continue
            out.update(flatten(value, f"{tag}/"))
        elif key == EPISODES_KEY or tag in _SKIP_KEYS:
            continue
        elif isinstance(value, (bool, np.bool_)):
            continue
        elif isinstance(value, (int, float, np.integer, np.floating)):
            out[tag] = float(value)
        elif hasattr(value, "item") and getattr(value, "size", 0) == 1:  # 0-d tensors and arrays
            try:
                out[tag] = float(value.item())
            except (TypeError, ValueError):
                pass
    return out


def env_steps(result: dict[str, Any]) -> int:
    value = result.get(ENV_RUNNER_RESULTS, {}).get(NUM_ENV_STEPS_SAMPLED_LIFETIME)
    if value is None:
        value = result.get(NUM_ENV_STEPS_SAMPLED_LIFETIME, 0)
    return int(value or 0)


def episodes_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    records = result.get(ENV_RUNNER_RESULTS, {}).get(EPISODES_KEY) or []
    return [r for r in records if isinstance(r, dict)]


def finite(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


# -- checkpoints -------------------------------------------------------------------------------
def save_checkpoint(algo, setup: Setup, path: Path, iteration: int, steps: int) -> str:
    algo.save_to_path(str(path))
    meta = {**setup.describe(), "iteration": iteration, "steps": steps, "mosaic_schema": catalog.SCHEMA_VERSION}
    (path / CHECKPOINT_META).write_text(json.dumps(meta, indent=1))
    return str(path)


def checkpoint_root(path: str) -> Path:
    """The checkpoint directory itself (users may point at a file inside it)."""
    p = Path(os.path.expanduser(path))
    if p.is_file():
        p = p.parent
    return p


# -- placement (which nodes the env runners run on) --------------------------------------------
def runner_placement(algo) -> dict[str, Any]:
    """Node ids of the worker process and of every env runner, from Ray's runtime context."""
    def node_of(_runner):
        import ray as _ray
        return _ray.get_runtime_context().get_node_id()

    group = algo.env_runner_group
    remote = group.foreach_env_runner(node_of, local_env_runner=False) if group.num_remote_env_runners() else []
    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    return {"driver_node": ray.get_runtime_context().get_node_id(), "env_runner_nodes": list(remote),
            "cluster_nodes": nodes}
