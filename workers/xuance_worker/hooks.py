"""XuanCe's callbacks turned into telemetry (``Hooks``), installed on an agent by ``install_hooks``:
episode events with each agent's return, heartbeats, periodic checkpoints, frames, the stop's
safe point, and every scalar XuanCe logs. Training and eval (``evaluate``) both install them.
"""
from __future__ import annotations

from typing import Any

from workers.sdk.stop import SIGNALS
from workers.sdk.telemetry import HEARTBEAT_SECONDS, Emitter
from workers.xuance_worker import catalog
from workers.xuance_worker.run_setup import PERIODIC_PREFIX


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None  # arrays, strings: not a scalar


class Hooks:
    """XuanCe's hooks -> telemetry.

    - ``scalars``: wraps ``agent.log_infos``, through which XuanCe logs every
      scalar (its TensorBoard files are still written).
    - ``watch(envs)``: wraps the vectorised environments' ``step``. Each
      sub-environment's ``info`` carries ``episode_score`` (a dict of each
      agent's return for multi-agent envs) and ``episode_step``; an episode
      ends where XuanCe's loops end it (all agents terminated, or truncated).
      Taken here rather than from XuanCe's ``on_train_episode_info`` callback
      because not every agent calls that (CommNet, IC3Net, TarMAC do not), nor
      does any call it while testing. Frames and heartbeats come from here too.
    - the ``agent.callback`` methods: periodic checkpoints and the stop, at the end
      of a training step (or, where XuanCe trains in whole episodes -- MARL agents
      with ``use_rnn`` -- after an update between episodes), once ``safe_point()``
      says the agent can be saved and continued exactly (on-policy: its rollout
      buffer was just used and cleared). The class implements every hook of XuanCe's
      ``MultiAgentBaseCallback`` (and so ``BaseCallback``), which XuanCe calls by name.
    """

    def __init__(self, emitter: Emitter, multi_agent: bool, agent_keys: list[str] | None = None,
                 checkpoint_every: int = 0, last_step: int = 0, save=None, frames=None, recorder=None,
                 stop=None, safe_point=None, episodic: bool = False, start_step: int = 0):
        self.emitter = emitter
        self.multi_agent = multi_agent
        teams = catalog.mpe_teams(agent_keys or []) if multi_agent else {}
        self.teams = teams if len(teams) > 1 else {}
        self.checkpoint_every = checkpoint_every
        # a continued run's next periodic checkpoint is the first one after its checkpoint's step
        self.next_checkpoint = (start_step // checkpoint_every + 1) * checkpoint_every if checkpoint_every else 0
        self.last_step = last_step  # the final checkpoint is saved at the end anyway
        self.save = save
        # stop(step): save the stop's checkpoint and raise Stopped; safe_point(): can the agent be
        # saved now and continued exactly; episodic: XuanCe trains in whole episodes (MARL use_rnn)
        # and calls on_train_step_end only once per agent.train, so the stop is taken after updates
        self.stop = stop
        self.safe_point = safe_point or (lambda: True)
        self.episodic = episodic
        self.frames = frames
        # a workers.sdk.dataset.Recorder when the run records (single-agent: the descriptor refuses the rest)
        self.recorder = recorder
        self.env_steps = 0  # steps of the watched environments (what evaluation reports)

    # -- scalars (wraps agent.log_infos) -------------------------------------
    def scalars(self, info: dict[str, Any], step: int) -> None:
        emit = self.emitter.scalar
        for tag, value in info.items():
            if value is None:
                continue
            if isinstance(value, dict):
                # {"env-0": x}: an episode's steps or return, sent as an episode event instead
                if "Episode-Steps" in tag or "Episode-Rewards" in tag:
                    continue
                for sub, sub_value in value.items():
                    number = _number(sub_value)
                    if number is not None:
                        emit(f"{tag}/{sub}", number, step)
                continue
            number = _number(value)
            if number is not None:
                emit(tag, number, step)

    # -- episodes, frames, heartbeats (wraps envs.step) ----------------------
    def watch(self, envs, step_of=None) -> None:
        """Report what ``envs.step`` returns. ``step_of()`` is the step an episode is
        reported at (the agent's step counter in training); by default the
        environment steps taken so far (evaluation)."""
        step = envs.step
        multi_agent = self.multi_agent
        episodes = self._record(envs)

        def step_and_report(actions):
            result = step(actions)
            terminals, truncations, infos = result[2], result[3], result[4]
            n = len(infos)
            if episodes is not None:
                # XuanCe's vector envs return an episode's final observation itself and
                # the next one's first in info["reset_obs"]
                episodes.step(actions, result[0], result[1], terminals, truncations, {"final_obs": result[0]},
                              reset_obs={i: infos[i]["reset_obs"] for i in range(n) if "reset_obs" in infos[i]})
            self.env_steps += n
            at = self.env_steps if step_of is None else int(step_of())
            for i in range(n):
                done = all(terminals[i].values()) if multi_agent else terminals[i]
                if done or truncations[i]:
                    self._episode(at, infos[i], i)
            self.emitter.heartbeat(at, every=HEARTBEAT_SECONDS)
            if self.frames is not None:
                self.frames.maybe_publish(envs.render, "rgb_array")
            return result

        envs.step = step_and_report

    def _record(self, envs):
        """The vector env's transitions into the recorder (VectorEpisodes), fed from
        step and reset; XuanCe's agents read their first observation from
        ``envs.buf_obs``, which the env filled when it was made."""
        if self.recorder is None:
            return None
        import copy

        from workers.sdk.dataset import VectorEpisodes
        self.recorder.spaces = {"observation_space": str(envs.observation_space),
                                "action_space": str(envs.action_space)}
        episodes = VectorEpisodes(self.recorder.store, envs.num_envs, same_step=True)
        if getattr(envs, "buf_obs", None) is not None:
            episodes.reset(copy.deepcopy(envs.buf_obs))
        reset = envs.reset

        def reset_and_record(*args, **kwargs):
            result = reset(*args, **kwargs)
            episodes.reset(copy.deepcopy(result[0] if isinstance(result, tuple) else result))
            return result

        envs.reset = reset_and_record
        return episodes

    def _episode(self, step: int, info: dict[str, Any], env_index: int) -> None:
        score = info["episode_score"]
        length = int(info["episode_step"])
        if isinstance(score, dict):  # multi-agent: each agent's return; the team's is their mean
            agents = {key: float(value) for key, value in score.items()}
            team_return = sum(agents.values()) / max(1, len(agents))
            self.emitter.episode(step, team_return, length, env_index=env_index, agents=agents)
            for team, members in self.teams.items():
                value = sum(agents[m] for m in members if m in agents) / max(1, len(members))
                self.emitter.scalar(f"returns/{team}", value, step)
        else:
            self.emitter.episode(step, float(score), length, env_index=env_index)

    # -- XuanCe's callback interface ----------------------------------------
    def _at_safe_point(self, step: int) -> None:
        """A periodic checkpoint once one is due, then the stop if one was asked for. Both wait for
        a safe point: a checkpoint taken there is one a run continues from exactly."""
        due = self.checkpoint_every and self.next_checkpoint <= step < self.last_step and self.save is not None
        stop = SIGNALS.stop_requested and self.stop is not None and step < self.last_step
        if not (due or stop) or not self.safe_point():
            return
        if due:
            while self.next_checkpoint <= step:
                self.next_checkpoint += self.checkpoint_every
            self.save(f"{PERIODIC_PREFIX}{step}", f"model_step_{step}.pth", manifest=True)
        if stop:
            self.stop(step)

    def on_train_step_end(self, current_step, **kwargs):
        self._at_safe_point(int(current_step))

    def on_train_epochs_end(self, current_step, **kwargs):
        # elsewhere XuanCe calls it in the middle of a step: this step's transitions stored, the
        # step counter not yet advanced; a checkpoint there would have the step trained twice
        if self.episodic:
            self._at_safe_point(int(current_step))

    def on_train_episode_info(self, **kwargs):
        return

    def on_train_step(self, current_step, **kwargs):
        return

    def on_update_start(self, iterations, **kwargs):
        return {}

    def on_update_end(self, iterations, **kwargs):
        return {}

    def on_update_agent_wise(self, iterations, agent_key, **kwargs):
        return {}

    def on_test_step(self, *args, **kwargs):
        return

    def on_test_end(self, *args, **kwargs):
        return


def install_hooks(agent, hooks: Hooks) -> None:
    agent.callback = hooks
    log_infos = agent.log_infos

    def log_infos_with_telemetry(info: dict, x_index: int):
        hooks.scalars(info, x_index)
        log_infos(info, x_index)

    agent.log_infos = log_infos_with_telemetry
