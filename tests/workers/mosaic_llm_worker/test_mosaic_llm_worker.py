"""The MOSAIC LLM worker through the real daemon and CLI, with the real local model (Gemma 3 270M through
llama.cpp): MultiGrid soccer with mixed teams, tic-tac-toe LLM vs random, chess LLM vs Stockfish, an LLM
against a trained RLlib checkpoint; seats refused at submit by name. Episodes are a few moves: the local
model answers in 0.3 s alone, several seconds on a busy 2-core machine."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT
from workers.mosaic_llm_worker import WORKER
from workers.mosaic_llm_worker.standings import ELO_START, Standings
from workers.sdk.config import ConfigError
from workers.sdk.telemetry import check_event

needs_model = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                 reason="llama-cpp-python is not built yet")
needs_chess = pytest.mark.skipif(importlib.util.find_spec("chess") is None,
                                 reason="python-chess (pettingzoo's chess dependency) is not installed")
WAIT = "600"
SOCCER = "MosaicMultiGrid-S-2v2-IndAgObs-v1"


def events_of(home, run_id: str) -> list[dict]:
    lines = (home.run_dir(run_id) / "events.jsonl").read_text().splitlines()
    return [check_event(json.loads(line)) for line in lines]


def finish(mosaic, run_id: str) -> dict:
    mosaic.run("wait", run_id, "--timeout", WAIT)
    run = mosaic.show(run_id)
    if run["state"] != "succeeded":
        stderr = (mosaic.home.run_dir(run_id) / "stderr.log").read_text(errors="replace")[-4000:]
        raise AssertionError(f"run {run_id} is {run['state']} ({run.get('reason')}):\n{stderr}")
    return run


def llm_steps(events: list[dict]) -> list[dict]:
    """The final llm_step of each call (partial ones stream the reply before it)."""
    return [e for e in events if e["type"] == "llm_step" and not e.get("partial")]


def scalars(events: list[dict]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for e in events:
        if e["type"] == "scalar":
            out.setdefault(e["tag"], []).append(e["value"])
    return out


def submit(mosaic, env: str, *sets: str, extra: tuple[str, ...] = ()) -> str:
    args = ["--worker", "mosaic_llm", "--algo", "play", "--env", env, *extra]
    for s in sets:
        args += ["--set", s]
    return mosaic.submit(*args)


# -- the descriptor ------------------------------------------------------------------------------
def test_descriptor_imports_nothing_heavy():
    code = textwrap.dedent(f"""
        import sys
        from workers.mosaic_llm_worker import WORKER
        WORKER.capabilities()
        WORKER.schema("play")
        WORKER.validate({{"worker": "mosaic_llm", "algo": "play", "env": "{SOCCER}",
                          "params": {{"seats": ["llm", "random", {{"kind": "llm", "llm": {{"backend": "openai"}}}},
                                                "random"]}}}})
        heavy = ("llama_cpp", "openai", "anthropic", "gymnasium", "pettingzoo", "numba", "mosaic_multigrid",
                 "torch", "ray", "numpy", "chess")
        print(",".join(sorted(m for m in heavy if m in sys.modules)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=str(ROOT))
    assert out.stdout.strip() == ""


def test_capabilities_list_the_installed_envs():
    caps = WORKER.capabilities()
    assert caps["algorithms"] == ["play"]
    assert {SOCCER, "MosaicMultiGrid-BB-3v3-IndAgObs-v1", "MosaicMultiGrid-C-1v1-IndAgObs-v1",
            "MosaicMultiGrid-AF-2v2-IndAgObs-v1", "tictactoe_v3", "connect_four_v3", "go_v5"} <= set(caps["envs"]["play"])
    assert ("chess_v6" in caps["envs"]["play"]) == (importlib.util.find_spec("chess") is not None)
    assert caps["seat_kinds"] == ["llm", "random", "stockfish", "checkpoint"]


def _config(env: str = "tictactoe_v3", **params) -> dict:
    return {"worker": "mosaic_llm", "algo": "play", "env": env, "params": params}


@pytest.mark.parametrize("config, field", [
    (_config(seats=["llm"]), "params.seats"),                                          # 2 seats, 1 given
    (_config(SOCCER, seats=["llm", "random", "llm"]), "params.seats"),                # 4 seats
    (_config(seats=["llm", "robot"]), "params.seats[1]"),                              # unknown kind
    (_config(seats=["llm", {"kind": "randm"}]), "params.seats[1].kind"),
    (_config(seats=["stockfish", "random"]), "params.seats[0]"),                       # chess only
    (_config(seats=["llm", {"kind": "llm", "llm": {"backend": "gpt"}}]), "params.seats[1].llm.backend"),
    (_config(seats=["llm", {"kind": "llm", "llm": {"api_key": "sk-x"}}]), "params.seats[1].llm.api_key"),
    (_config(seats=["llm", {"kind": "random", "level": 3}]), "params.seats[1].level"),
    (_config(seats=["llm", "checkpoint:runs/x"]), "params.seats[1].checkpoint"),       # not absolute
    (_config(seats=["llm", "checkpoint:/nonexistent/ck"]), "params.seats[1].checkpoint"),
    (_config("go_v5", seats=["llm", "checkpoint:/x"]), "params.seats[1]"),               # no loader
    (_config(SOCCER, seats=["llm", "random", "checkpoint:/x", "random"]), "params.seats[2].checkpoint"),
    (_config(max_cost=1.0), "params.max_cost"),                                        # a cost needs a price
    (_config(seats=["llm", {"kind": "llm", "role": "goalie"}]), "params.seats[1].role"),
    (_config(backend="gpt"), "params.backend"),
    (_config(coordination="L4"), "params.coordination"),
    (_config("MosaicMultiGrid-S-9v9-IndAgObs-v1"), "env"),
])
def test_bad_seats_are_refused_naming_the_field(config, field):
    with pytest.raises(ConfigError) as err:
        WORKER.validate(config)
    assert err.value.field == field


@needs_chess
def test_stockfish_seat_settings_are_checked():
    for seat, field in (("stockfish:25", "params.seats[1].level"), ("stockfish:x", "params.seats[1]"),
                        ({"kind": "stockfish", "movetime_ms": 0}, "params.seats[1].movetime_ms")):
        with pytest.raises(ConfigError) as err:
            WORKER.validate(_config("chess_v6", seats=["llm", seat]))
        assert err.value.field == field
    seats = WORKER.validate(_config("chess_v6", seats=["llm", "stockfish:3"]))["params"]["seats"]
    assert seats[1] == {"kind": "stockfish", "level": 3, "movetime_ms": 50}
    assert seats[0]["kind"] == "llm" and seats[0]["llm"]["backend"] == "local"


def test_a_checkpoint_of_another_env_is_refused(tmp_path):
    checkpoint = tmp_path / "final"
    (checkpoint / "learner_group" / "learner" / "rl_module").mkdir(parents=True)
    (checkpoint / "mosaic_checkpoint.json").write_text(json.dumps({"env": "connect_four_v3"}))
    with pytest.raises(ConfigError) as err:
        WORKER.validate(_config(seats=["llm", f"checkpoint:{checkpoint}"]))
    assert err.value.field == "params.seats[1].checkpoint" and "connect_four_v3" in err.value.message


def test_multigrid_checkpoints_are_checked(tmp_path):
    """A MultiGrid seat plays an RLlib checkpoint of the same env, layout and env_kwargs (view_size changes
    what the policy sees; shared_value's actors read every agent's view)."""
    checkpoint = tmp_path / "final"
    (checkpoint / "learner_group" / "learner" / "rl_module").mkdir(parents=True)
    meta = checkpoint / "mosaic_checkpoint.json"
    seats = ["llm", f"checkpoint:{checkpoint}", "random", "random"]
    for trained, params, needle in (
            ({"env": SOCCER, "policy": "shared_value", "env_kwargs": {}}, {}, "'shared_value' policy layout"),
            ({"env": SOCCER, "policy": "independent", "env_kwargs": {"view_size": 5}}, {}, "view_size"),
            ({"env": "MosaicMultiGrid-S-1v1-IndAgObs-v1", "policy": "independent"}, {}, "S-1v1")):
        meta.write_text(json.dumps(trained))
        with pytest.raises(ConfigError) as err:
            WORKER.validate(_config(SOCCER, seats=seats, **params))
        assert err.value.field == "params.seats[1].checkpoint" and needle in err.value.message
    meta.write_text(json.dumps({"env": SOCCER, "policy": "shared", "env_kwargs": {}}))
    checked = WORKER.validate(_config(SOCCER, seats=seats))["params"]["seats"]
    assert checked[1] == {"kind": "checkpoint", "checkpoint": str(checkpoint)}
    # the xuance worker's checkpoints: a model file, its folder's metadata; actors that read their own view
    model = tmp_path / "xuance" / "final_train_model.pth"
    model.parent.mkdir()
    model.write_bytes(b"")
    seats[1] = f"checkpoint:{model}"
    xuance = {"worker": "xuance", "family": "multigrid", "env": "soccer_2vs2", "env_id": SOCCER, "env_kwargs": {}}
    for trained, needle in (({**xuance, "algo": "commnet"}, "commnet policy, whose actors read other agents'"),
                            ({**xuance, "algo": "mappo", "env_id": "MosaicMultiGrid-S-1v1-IndAgObs-v1"}, "S-1v1"),
                            ({**xuance, "algo": "ippo", "family": "mpe"}, "a XuanCe seat plays MultiGrid")):
        (model.parent / "mosaic_checkpoint.json").write_text(json.dumps(trained))
        with pytest.raises(ConfigError) as err:
            WORKER.validate(_config(SOCCER, seats=seats))
        assert err.value.field == "params.seats[1].checkpoint" and needle in err.value.message
    (model.parent / "mosaic_checkpoint.json").write_text(json.dumps({**xuance, "algo": "qmix"}))
    assert WORKER.validate(_config(SOCCER, seats=seats))["params"]["seats"][1]["checkpoint"] == str(model)


def test_a_seats_llm_settings_override_the_runs():
    config = WORKER.validate(_config(temperature=0.5, seats=[
        "llm", {"kind": "llm", "llm": {"backend": "openai", "model": "gpt-4o", "temperature": 0.0}}]))
    first, second = config["params"]["seats"]
    assert first["llm"]["backend"] == "local" and first["llm"]["temperature"] == 0.5
    assert second["llm"]["backend"] == "openai" and second["llm"]["model"] == "gpt-4o"
    assert second["llm"]["temperature"] == 0.0 and second["llm"]["api_key_env"] == "OPENAI_API_KEY"


def test_bad_seat_refused_at_submit(daemon, mosaic):
    out = mosaic.run("submit", "--worker", "mosaic_llm", "--algo", "play", "--env", "tictactoe_v3",
                     "--set", 'seats=["llm", "stockfish"]')
    assert out.returncode != 0
    assert "mosaic: error: params.seats[1]: stockfish plays chess (chess_v6) only" in out.stderr


# -- results and ratings ----------------------------------------------------------------------------
def test_standings_win_draw_loss_and_elo():
    table = Standings(["0", "1", "2", "3"], k=32)
    teams = {"0": 1, "1": 1, "2": 2, "3": 2}
    assert table.record({1: 1.0, 2: 0.0}, teams) == {"0": "win", "1": "win", "2": "loss", "3": "loss"}
    assert table.rating["0"] == table.rating["1"] == ELO_START + 16       # equal ratings: K/2 each
    assert table.rating["2"] == ELO_START - 16
    assert table.record({1: 2.0, 2: 2.0}, teams)["3"] == "draw"
    # the favourite gains less than it lost in a draw: ratings move toward each other
    assert ELO_START < table.rating["0"] < ELO_START + 16
    assert sum(table.rating.values()) == pytest.approx(4 * ELO_START)       # zero-sum
    assert (table.wins["0"], table.draws["0"], table.losses["0"]) == (1, 1, 0)
    # three seats each on its own team (collect's free-for-all): only the top scorer wins
    free = Standings(["0", "1", "2"])
    assert free.record({1: 3, 2: 1, 3: 1}, {"0": 1, "1": 2, "2": 3}) == {"0": "win", "1": "loss", "2": "loss"}


def test_multigrid_results_go_by_goals_not_shaped_returns():
    import gymnasium as gym
    import mosaic_multigrid  # noqa: F401

    from workers.mosaic_llm_worker.match import Match

    env = gym.make(SOCCER, disable_env_checker=True)
    env.reset(seed=0)
    game = env.unwrapped
    teams = {"0": 1, "1": 1, "2": 2, "3": 2}
    # blue stayed near the ball (+0.01 a step) but green scored
    returns = {"0": 0.0, "1": 0.0, "2": 0.3, "3": 0.3}
    game.team_scores = {1: 1, 2: 0}
    assert Match.multigrid_points(game, returns, teams) == {1: 1.0, 2: 0.0}
    game.team_scores = {}  # a game that counts no goals (collect): the team's return
    assert Match.multigrid_points(game, returns, teams) == {1: 0.0, 2: pytest.approx(0.6)}
    env.close()


# -- episodes with the real local model, through the daemon -----------------------------------------
@needs_model
def test_soccer_mixed_teams_llms_and_random(daemon, mosaic):
    """2v2 soccer: each team an LLM and a random teammate; visible_teammates, L3 roles, frames on."""
    run_id = submit(mosaic, SOCCER, 'seats=["llm", "random", {"kind": "llm", "role": "defender"}, "random"]',
                    "max_steps=1", "coordination=L3", "observation_mode=visible_teammates",
                    extra=("--seed", "3", "--frames"))
    run = finish(mosaic, run_id)
    events = events_of(mosaic.home, run_id)
    started = next(e for e in events if e["type"] == "run_started")
    assert started["seats"] == {"0": "llm:local:gemma-3-270m (default)", "1": "random",
                                "2": "llm:local:gemma-3-270m (default)", "3": "random"}
    calls = llm_steps(events)
    # the LLM seats, and only they, were asked
    assert sorted((e["step"], e["agent"]) for e in calls) == [(0, "0"), (0, "2")]
    for call in calls:
        assert call["valid"] is True and call["error"] is None        # the grammar keeps replies legal
        assert call["action"] in ("noop", "left", "right", "forward", "pickup", "drop", "toggle", "done")
        assert call["tokens_in"] > 0 and call["latency_s"] > 0
        assert "You are at column" in call["observation"] and "Visible teammates:" in call["observation"]
    by_agent = {e["agent"]: e for e in calls}
    assert "Your role: FORWARD" in by_agent["0"]["prompt"] and "Your role: DEFENDER" in by_agent["2"]["prompt"]
    assert "Your team is green (agent 1 with you)" in by_agent["0"]["prompt"]
    [episode] = [e for e in events if e["type"] == "episode"]
    assert episode["length"] == 1 and set(episode["agents"]) == {"0", "1", "2", "3"}
    tags = scalars(events)
    for seat in "0123":  # no goal in one step: a draw for everyone, ratings unchanged
        assert tags[f"results/{seat}/draws"] == [1.0] and tags[f"elo/{seat}"] == [ELO_START]
    assert tags["llm/0/calls"] == [1.0] and tags["llm/0/invalid_rate"] == [0.0]
    assert "llm/1/calls" not in tags
    assert run["state"] == "succeeded"


@needs_model
def test_tictactoe_llm_against_random(daemon, mosaic):
    run_id = submit(mosaic, "tictactoe_v3", 'seats=["llm", "random"]', "episodes=2", "max_steps=2",
                    "coordination=L2")
    finish(mosaic, run_id)
    events = events_of(mosaic.home, run_id)
    calls = llm_steps(events)
    # the LLM moves first in each episode, on a fresh board; the random seat answers
    assert [(e["episode"], e["step"], e["agent"]) for e in calls] == [(0, 0, "player_1"), (1, 2, "player_1")]
    for call in calls:
        assert "Legal moves: 0, 1, 2, 3, 4, 5, 6, 7, 8" in call["observation"]
        assert "Tips: win if you can" in call["prompt"] and call["action"] in [str(c) for c in range(9)]
    episodes = [e for e in events if e["type"] == "episode"]
    assert [e["length"] for e in episodes] == [2, 2]                      # the run's move limit: draws
    tags = scalars(events)
    assert tags["results/player_1/draws"] == [1.0, 2.0] and tags["elo/player_2"] == [ELO_START, ELO_START]


@needs_model
def test_a_token_budget_stops_the_series_cleanly(daemon, mosaic):
    """A budget of 1 token: the first episode (one LLM move, one random move) is played out, the LLM's next
    turn stops the run, which completes; the phase event names the reason."""
    run_id = submit(mosaic, "tictactoe_v3", 'seats=["llm", "random"]', "episodes=3", "max_steps=2",
                    "max_total_tokens=1")
    run = finish(mosaic, run_id)
    events = events_of(mosaic.home, run_id)
    calls = llm_steps(events)
    assert len(calls) == 1
    used = calls[0]["tokens_in"] + calls[0]["tokens_out"]
    phases = [e["name"] for e in events if e["type"] == "phase"]
    assert phases[-1] == f"token budget reached: {used} of 1 tokens" == run["summary"]["phase"]
    assert [e["length"] for e in events if e["type"] == "episode"] == [2]     # only the finished episode
    assert events[-1]["type"] == "run_completed" and run["state"] == "succeeded"


@needs_model
@needs_chess
def test_chess_llm_against_stockfish(daemon, mosaic):
    run_id = submit(mosaic, "chess_v6", 'seats=["llm", "stockfish:1"]', "max_steps=3")
    finish(mosaic, run_id)
    events = events_of(mosaic.home, run_id)
    started = next(e for e in events if e["type"] == "run_started")
    assert started["seats"]["player_1"] == "stockfish:1"
    calls = llm_steps(events)
    assert [e["step"] for e in calls] == [0, 2] and all(e["agent"] == "player_0" for e in calls)
    opening = calls[0]
    assert "FEN: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1" in opening["observation"]
    assert opening["valid"] and opening["action"] in opening["observation"].split("Legal moves: ")[1].split(", ")
    # stockfish answered: the second position is white's again, after two moves
    assert " w " in calls[1]["observation"].split("FEN: ")[1].split("\n")[0]
    assert "Last move: " in calls[1]["observation"] and "Last move: none" not in calls[1]["observation"]
    [episode] = [e for e in events if e["type"] == "episode"]
    assert episode["length"] == 3


def _policy_reply(checkpoint: str, first_move: int) -> int:
    """The checkpoint's greedy answer to X's first move, computed here with the ray worker's eval code."""
    import numpy as np
    from pettingzoo.classic import tictactoe_v3

    from workers.ray_worker import evaluate

    module = evaluate.load_modules(Path(checkpoint))["shared"]
    env = tictactoe_v3.env()
    env.reset(seed=0)
    env.step(first_move)
    raw = env.observe("player_2")
    obs = {"observation": np.asarray(raw["observation"], dtype=np.float32).reshape(-1),
           "action_mask": np.asarray(raw["action_mask"], dtype=np.float32)}
    return int(evaluate.act(module, obs, env.action_space("player_2")))


@pytest.mark.long
@pytest.mark.ray   # its fixture starts a private Ray cluster
@pytest.mark.slow  # its fixture trains an RLlib policy (38 s, loaded machine)
@needs_model
def test_llm_against_a_trained_checkpoint_and_random(daemon, mosaic, tictactoe_checkpoint):
    """A mixed series: the LLM and a random seat each against an RLlib policy from another run."""
    llm_run = submit(mosaic, "tictactoe_v3", f'seats=["llm", "checkpoint:{tictactoe_checkpoint}"]',
                     "max_steps=4")
    random_run = submit(mosaic, "tictactoe_v3", f'seats=["random", "checkpoint:{tictactoe_checkpoint}"]',
                        "episodes=3")
    finish(mosaic, llm_run)
    finish(mosaic, random_run)
    events = events_of(mosaic.home, llm_run)
    started = next(e for e in events if e["type"] == "run_started")
    assert started["seats"]["player_2"] == f"checkpoint:{tictactoe_checkpoint}"
    calls = llm_steps(events)
    assert [e["step"] for e in calls] == [0, 2] and all(e["valid"] for e in calls)
    # the checkpoint's move is on the board the LLM sees next: 2 marks, 7 free cells; and it is the
    # policy's own greedy move, as the ray worker's eval code plays it
    free = calls[1]["observation"].split("Legal moves: ")[1].split(", ")
    assert len(free) == 7
    [answer] = set("012345678") - set(free) - {calls[0]["action"]}
    assert int(answer) == _policy_reply(tictactoe_checkpoint, int(calls[0]["action"]))
    events = events_of(mosaic.home, random_run)
    episodes = [e for e in events if e["type"] == "episode"]
    assert len(episodes) == 3 and all(e["length"] >= 5 for e in episodes)  # played out: masked moves only
    tags = scalars(events)
    results = [tags[f"results/player_2/{r}"][-1] for r in ("wins", "draws", "losses")]
    assert sum(results) == 3
    assert tags["elo/player_1"][-1] + tags["elo/player_2"][-1] == pytest.approx(2 * ELO_START)


@pytest.mark.parametrize("env, seats, shape", [
    (SOCCER, ["random"] * 4, (352, 512)),         # the pitch, rendered by mosaic-multigrid
    ("tictactoe_v3", ["random", "random"], (1000, 1000)),  # the board, PettingZoo's pygame render
])
def test_frames_of_the_pitch_and_the_board(tmp_path, env, seats, shape):
    """The worker process alone (random seats: no model), its frames read back from FastLane."""
    from workers.fastlane import layout
    from workers.fastlane.reader import FrameReader

    run_id = f"mlt-{os.getpid()}-{env[:5]}"
    config = {"worker": "mosaic_llm", "algo": "play", "env": env, "run_id": run_id,
              "frames": {"enabled": True, "fps": 100, "max_dim": 1024},
              "params": {"seats": seats, "max_steps": 3}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    try:
        with open(tmp_path / "events.jsonl", "w") as out:
            subprocess.run([sys.executable, "-m", "workers.mosaic_llm_worker.cli", "--config", "config.json"],
                           cwd=tmp_path, stdout=out, check=True, timeout=300,
                           env={**os.environ, "MOSAIC_HOME": str(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)})
        events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
        assert events[-1]["type"] == "run_completed" and events[-1]["step"] == 3
        reader = FrameReader(run_id)
        number, pixels = reader.latest()
        assert number >= 0 and pixels.shape[:2] == shape and pixels.std() > 0
        reader.close()
    finally:
        layout.cleanup(run_id)


def test_a_stopped_series_continues_with_its_standings_and_the_games_not_yet_played(daemon, mosaic):
    """mosaic stop in a tic-tac-toe series of two random seats: the games played so far and their
    standings are kept; mosaic continue plays the rest: every game once, win + draw + loss adding
    up to the series for each seat, the step counter going on."""
    from tests.helpers import wait_for
    games = 2000   # random games are fast: room for the stop to land mid-series
    run_id = submit(mosaic, "tictactoe_v3", f"episodes={games}", 'seats=["random", "random"]')
    wait_for(lambda: sum(e["type"] == "episode" for e in events_of(mosaic.home, run_id)) >= 20, 120, 0.02,
             what="twenty games")
    assert mosaic.run("stop", run_id, "--timeout", "120").returncode == 0
    run = mosaic.show(run_id)
    assert run["state"] == "stopped", run
    state = json.loads(Path(run["summary"]["stopped"]["checkpoint"]).read_text())
    played = state["next_episode"]
    assert 20 <= played < games
    for seat in ("player_1", "player_2"):
        standing = state["standings"]
        assert standing["wins"][seat] + standing["draws"][seat] + standing["losses"][seat] == played
    assert mosaic.run("continue", run_id, "--wait").returncode == 0
    run = finish(mosaic, run_id)
    assert run["restarts"] == 1
    events = events_of(mosaic.home, run_id)
    episodes = [e for e in events if e["type"] == "episode"]
    assert len(episodes) == games
    steps = [e["step"] for e in episodes]
    assert steps == sorted(steps) and len(set(steps)) == games   # no game twice, the counter went on
    final = scalars(events)
    for seat in ("player_1", "player_2"):
        total = sum(final[f"results/{seat}/{k}"][-1] for k in ("wins", "draws", "losses"))
        assert total == games
