"""The human worker's env families: each one's key map, and a few real keys played through the real
daemon (docs/play.md, "Key maps"). A family whose package is missing is skipped, saying which."""
from __future__ import annotations

import importlib.util
import json

import pytest

from daemon import protocol as P
from tests.helpers import connect, wait_for
from tests.workers.human_worker.test_human_worker import of_type, take_seat
from workers.human_worker import WORKER, catalog
from workers.sdk.config import ConfigError


def needs(*modules: str):
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not installed")


def keymap_of(env_id: str) -> dict:
    from workers.human_worker import keymaps, runtime

    family = catalog.family_of(env_id)
    env = runtime.make_env(env_id, family)
    try:
        return keymaps.keymap_for(env_id, family, env)
    finally:
        env.close()


def named(keymap: dict) -> dict[str, str]:
    """{key: action name}"""
    return {key: keymap["actions"][index] for key, index in keymap["keys"].items()}


# env, the modules it needs, {key: action name} the map must hold
KEYMAPS = [
    ("ALE/Breakout-v5", ["ale_py"], {"space": "FIRE", "left": "LEFT", "right": "RIGHT", "n": "NOOP"}),
    ("ALE/Pong-v5", ["ale_py"], {"up": "RIGHT", "down": "LEFT", "space": "FIRE", "W": "RIGHTFIRE"}),
    ("ALE/Venture-v5", ["ale_py"], {"q": "UPLEFT", "C": "DOWNRIGHTFIRE", "up": "UP", "S": "DOWNFIRE"}),
    ("VizdoomBasic-v1", ["vizdoom"], {"left": "MOVE_LEFT", "right": "MOVE_RIGHT", "space": "ATTACK", "n": "NOOP"}),
    ("VizdoomDeadlyCorridor-v1", ["vizdoom"], {"left": "TURN_LEFT", "a": "MOVE_LEFT", "up": "MOVE_FORWARD",
                                               "space": "ATTACK"}),
    ("crafter", ["crafter"], {"a": "move_left", "up": "move_up", "space": "do", "tab": "sleep", "t": "place_table",
                              "1": "make_wood_pickaxe", "6": "make_iron_sword", "n": "noop"}),
    ("MiniHack-Room-5x5-v0", ["minihack", "nle"], {"h": "west", "j": "south", "k": "north", "l": "east",
                                                   "y": "northwest", "u": "northeast", "b": "southwest",
                                                   "n": "southeast"}),
    ("NetHackChallenge-v0", ["nle"], {"L": "far east", "greater_than_sign": "down", "full_stop": "wait",
                                      "enter": "more", "escape": "esc", "comma": "pickup", "ctrl+d": "kick",
                                      "alt+l": "loot", "alt+p": "pray", "s": "search", "o": "open"}),
    ("jumanji/Snake-v1", ["jumanji"], {"up": "up", "right": "right", "s": "down", "a": "left"}),
    ("jumanji/PacMan-v1", ["jumanji"], {"left": "left", "n": "no-op"}),
    ("CarRacing-v3", ["Box2D"], {"left": "steer left", "right": "steer right", "up": "gas", "down": "brake"}),
    ("MiniGrid-Empty-5x5-v0", ["minigrid"], {"up": "forward", "left": "left", "space": "toggle"}),
]


@pytest.mark.parametrize("env_id,modules,expected", KEYMAPS, ids=[k[0] for k in KEYMAPS])
def test_each_family_maps_its_actions_by_name(env_id, modules, expected, tmp_path, monkeypatch):
    if missing := [m for m in modules if importlib.util.find_spec(m) is None]:
        pytest.skip(f"{', '.join(missing)} not installed")
    monkeypatch.chdir(tmp_path)   # ViZDoom writes its _vizdoom.ini where it runs
    keymap = keymap_of(env_id)
    if env_id == "ALE/Venture-v5":          # a full action set: all 18 meanings on a key
        assert len(keymap["actions"]) == 18 and set(keymap["keys"].values()) == set(range(18))
    got = named(keymap)
    assert {key: got.get(key) for key in expected} == expected
    if keymap["noop"] is not None:
        assert keymap["actions"][keymap["noop"]] in ("NOOP", "noop", "no-op", "do nothing", "wait")


def test_what_a_person_cannot_play_is_refused_in_one_line():
    def refusal(env: str, **fields) -> str | None:
        try:
            WORKER.validate({"worker": "human", "algo": "play", "env": env, **fields})
        except ConfigError as err:
            assert "\n" not in str(err)
            return str(err)
        return None

    assert "continuous actions only" in refusal("Pendulum-v1")
    assert refusal("CarRacing-v3") is None      # played as its discrete variant
    assert "multi-discrete" in refusal("jumanji/Tetris-v0")
    assert refusal("jumanji/Minesweeper-v0") is None   # its cells are typed
    assert "continuous" in refusal("jumanji/SearchAndRescue-v0")
    assert "solo drills" in refusal("MosaicMultiGrid-S-2v2-IndAgObs-v1")
    assert refusal("MosaicMultiGrid-S-G-1v0-v1") is None
    assert "typed commands" in refusal("textworld-coin", record={"episodes": 1})
    assert "turn by turn" in refusal("textworld-coin", params={"mode": "realtime"})
    config = WORKER.validate({"worker": "human", "algo": "play", "env": "VizdoomBasic-v1"})
    assert config["params"]["mode"] == "realtime"
    for env in ("crafter", "MiniHack-Room-5x5-v0", "NetHackScore-v0", "textworld-coin", "jumanji/Snake-v1"):
        assert WORKER.validate({"worker": "human", "algo": "play", "env": env})["params"]["mode"] == "turn", env


def test_a_misspelled_env_is_refused_in_one_line_with_the_closest_ids():
    """An id no family here registers is refused at submit (it failed in the worker with gymnasium's
    NameNotFound), the closest ids named; every family's real ids pass."""
    def refusal(env: str) -> str | None:
        try:
            WORKER.validate({"worker": "human", "algo": "play", "env": env})
        except ConfigError as err:
            assert "\n" not in str(err)
            return str(err)
        return None

    assert "did you mean 'MiniGrid-Empty-5x5-v0'" in refusal("MiniGrid-Emtpy-5x5-v0")
    assert "did you mean 'CartPole-v1'" in refusal("CartPol-v1")
    assert "unknown environment 'Nonsense'" in refusal("Nonsense")
    playable = ["MiniGrid-Empty-5x5-v0", "BabyAI-GoToRedBallGrey-v0", "CartPole-v1", "FrozenLake-v1", "crafter",
                "textworld-treasure", "jumanji/Snake-v1", "MosaicMultiGrid-S-G-1v0-v1"]
    installed = {"ale_py": ["ALE/Breakout-v5"], "vizdoom": ["VizdoomBasic-v1"],
                 "minihack": ["MiniHack-Room-5x5-v0", "MiniHack-Corridor-R2-v0"],
                 "nle": ["NetHackScore-v0", "NetHackChallenge-v0", "NetHackStaircase-v0"]}
    for module, envs in installed.items():
        if importlib.util.find_spec(module) is not None:
            playable += envs
    assert [env for env in playable if refusal(env) is not None] == []


# -- real plays through the daemon ----------------------------------------------------------------
@pytest.fixture
def game_home(tmp_path, monkeypatch):
    """A HOME of the test's own, set before the daemon starts (its runs inherit it): what a play's
    libraries might write under ~ lands there (TextWorld's games are cached in the session's
    $XDG_CACHE_HOME/mosaic-tui/textworld: compiled once a session)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def start(mosaic, env: str, *args: str):
    run_id = mosaic.submit("--worker", "human", "--algo", "play", "--env", env, "--seed", "0", *args)
    player = connect(mosaic.home, name="player")
    take_seat(player, run_id, timeout=120)
    keymap = wait_for(lambda: of_type(mosaic.home, run_id, "keymap"), 120, 0.1, what="the keymap")[0]
    return run_id, player, keymap


def finish(mosaic, run_id: str, player) -> list[dict]:
    try:
        mosaic.run("wait", run_id, "--timeout", "120")
    finally:
        player.close()
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded", run
    return [e for e in of_type(mosaic.home, run_id, "play") if "action" in e]


def stairs_path() -> tuple[str, str]:
    """NetHack's keys from the hero to the stairs of MiniHack-Room-5x5-v0 (seed 0), as NLE places
    them: east or west first (l, h), then south or north (j, k); and before them a key that walks
    into the room's wall (the hero stays, NetHack says why), "" if none is beside the hero."""
    import gymnasium as gym
    import minihack  # noqa: F401
    import numpy as np
    from nle import nethack as nh

    env = gym.make("MiniHack-Room-5x5-v0")
    obs, _ = env.reset(seed=0)
    env.close()
    x, y = int(obs["blstats"][nh.NLE_BL_X]), int(obs["blstats"][nh.NLE_BL_Y])
    rows, cols = np.where(obs["chars"] == ord(">"))
    dx, dy = int(cols[0]) - x, int(rows[0]) - y
    path = ("l" if dx > 0 else "h") * abs(dx) + ("j" if dy > 0 else "k") * abs(dy)
    # chars is the map (21 rows): the cell north of the hero, a wall ("-") or stone (" ")?
    bump = "k" if chr(obs["chars"][y - 1][x]) in "- " else ""
    return bump, path


@needs("minihack", "nle")
def test_typing_nethack_keys_walks_the_hero_to_the_stairs(daemon, mosaic):
    bump, path = stairs_path()
    assert set(path) <= set("hjkl") and len(path) >= 2
    run_id, player, keymap = start(mosaic, "MiniHack-Room-5x5-v0", "--set", "episodes=1")
    assert keymap["mode"] == "turn" and named(keymap)["l"] == "east" and named(keymap)["j"] == "south"
    for key in bump + path:    # the keys as typed, sent as the app sends them: the action of each
        player.call(P.ACT, run=run_id, seat="0", action=keymap["keys"][key])
    plays = finish(mosaic, run_id, player)
    assert all(isinstance(e.get("message"), str) for e in plays)     # NLE's message line, every step
    if bump:    # into the wall: the hero stays, and NetHack's message line says why
        assert plays[0]["message"] and not plays[0]["ended"]
    # then each key is one step of the hero, and the last reaches the stairs down: the episode ends, won
    assert [e["action_name"] for e in plays] == [{"h": "west", "j": "south", "k": "north", "l": "east"}[k]
                                                 for k in bump + path]
    episodes = of_type(mosaic.home, run_id, "episode")
    assert len(episodes) == 1 and episodes[0]["return"] > 0 and episodes[0]["length"] == len(bump + path)
    assert plays[-1]["ended"] and not any(e["ended"] for e in plays[:-1])


@needs("nle")
def test_an_nle_task_says_its_goal_where_its_class_words_one():
    """The objective a NetHack play shows: NLE's task docstring's "This task requires the agent to ..."
    (the score tasks give a reward formula only: no objective)."""
    from workers.human_worker import runtime
    for env_id, goal in (("NetHackStaircase-v0", "get on top of a staircase down (>)"),
                         ("NetHackOracle-v0", "reach the oracle (by standing next to it)"), ("NetHackScore-v0", None)):
        env = runtime.make_env(env_id, "nethack")
        try:
            assert runtime.nle_task(env) == goal, env_id
        finally:
            env.close()


@pytest.mark.long   # breadth: one more worker or family on a path another test here proves (make test-long)
@needs("crafter")
def test_crafter_moves_on_its_keys(daemon, mosaic):
    run_id, player, keymap = start(mosaic, "crafter", "--steps", "3")
    keys = keymap["keys"]
    assert keymap["frames"] is True
    for key in ("a", "w", "space"):
        player.call(P.ACT, run=run_id, seat="0", action=keys[key])
    plays = finish(mosaic, run_id, player)
    assert [e["action_name"] for e in plays] == ["move_left", "move_up", "do"]
    objective = of_type(mosaic.home, run_id, "play")[0]["objective"]
    assert "22 achievements" in objective and "collect_wood" in objective
    moves = (mosaic.home.run_dir(run_id) / "moves.jsonl").read_text().splitlines()
    assert [json.loads(m)["action"] for m in moves] == [keys["a"], keys["w"], keys["space"]]


@pytest.mark.long   # breadth: one more worker or family on a path another test here proves (make test-long)
@needs("textworld")
def test_a_textworld_command_is_typed_and_answered(game_home, daemon, mosaic):
    run_id, player, keymap = start(mosaic, "textworld-coin", "--set", "episodes=1")
    assert keymap.get("text") is True and keymap["keys"] == {} and keymap["mode"] == "turn"
    assert keymap["frames"] is False          # the screen gives the frames' place to the text
    first = wait_for(lambda: [e for e in of_type(mosaic.home, run_id, "play") if "legal" in e], 120, 0.1,
                     what="the game's first text")[0]
    assert "coin" in first["message"] and "take coin" in first["legal"]
    assert first["objective"].startswith("Your objective is to retrieve the coin")
    player.call(P.ACT, run=run_id, seat="0", action=3)                  # a number is no command
    player.call(P.ACT, run=run_id, seat="0", action="dance wildly")     # not admissible: the game answers
    player.call(P.ACT, run=run_id, seat="0", action="take coin")
    plays = finish(mosaic, run_id, player)
    refused = [e for e in of_type(mosaic.home, run_id, "play") if e.get("refused")]
    assert len(refused) == 1 and "take coin" in refused[0]["legal"]
    assert [e["action"] for e in plays] == ["dance wildly", "take coin"]
    assert "verb" in plays[0]["message"] and plays[0]["reward"] == 0 and not plays[0]["ended"]
    assert plays[1]["reward"] > 0 and plays[1]["ended"]
    moves = [json.loads(m) for m in (mosaic.home.run_dir(run_id) / "moves.jsonl").read_text().splitlines()]
    assert [m["action"] for m in moves] == ["dance wildly", "take coin"]


@pytest.mark.long   # breadth: one more worker or family on a path another test here proves (make test-long)
@needs("jumanji")
def test_jumanji_snake_steps_on_the_arrows(daemon, mosaic):
    run_id, player, keymap = start(mosaic, "jumanji/Snake-v1", "--steps", "3")
    assert keymap["actions"] == ["up", "right", "down", "left"]
    for key in ("up", "left", "down"):
        player.call(P.ACT, run=run_id, seat="0", action=keymap["keys"][key])
    plays = finish(mosaic, run_id, player)
    assert [e["action_name"] for e in plays] == ["up", "left", "down"]


@pytest.mark.long   # Jumanji's Minesweeper compiles in JAX first (seconds to tens on a busy machine)
@needs("jumanji")
def test_minesweeper_cells_are_typed_and_an_open_cell_is_refused_again(daemon, mosaic):
    """Minesweeper's one action is a cell (a multi-discrete row and column): the person types it,
    "row col" or "row,col"; a word that is no cell, and a cell already opened, are refused with
    the cells still open, and the env does not step on them."""
    run_id, player, keymap = start(mosaic, "jumanji/Minesweeper-v0", "--steps", "2")
    assert keymap["text"] and keymap["keys"] == {} and len(keymap["actions"]) == 100
    assert keymap["actions"][:2] == ["0 0", "0 1"] and keymap["actions"][-1] == "9 9"
    first = wait_for(lambda: next((e for e in of_type(mosaic.home, run_id, "play") if "legal" in e), None), 60,
                     0.1, what="the open cells")
    assert len(first["legal"]) == 100
    player.call(P.ACT, run=run_id, seat="0", action="zz")
    refusal = wait_for(lambda: next((e for e in of_type(mosaic.home, run_id, "play") if e.get("refused")), None),
                       30, 0.1, what="a refusal")
    assert "not an open cell" in refusal["message"] and len(refusal["legal"]) == 100
    player.call(P.ACT, run=run_id, seat="0", action="4,5")
    opened = wait_for(lambda: next((e for e in of_type(mosaic.home, run_id, "play") if "action" in e), None), 60,
                      0.1, what="the cell opened")
    assert opened["action"] == 45 and opened["action_name"] == "4 5"
    if not opened.get("ended"):   # a mine ends the game at once
        assert "4 5" not in opened["legal"]
        player.call(P.ACT, run=run_id, seat="0", action="4 5")
        wait_for(lambda: len([e for e in of_type(mosaic.home, run_id, "play") if e.get("refused")]) == 2, 30, 0.1,
                 what="the opened cell refused")
        player.call(P.ACT, run=run_id, seat="0", action="0 0")
    plays = finish(mosaic, run_id, player)
    assert [e["action_name"] for e in plays][:1] == ["4 5"]


@pytest.mark.long   # breadth: one more worker or family on a path another test here proves (make test-long)
@needs("vizdoom")
def test_vizdoom_basic_plays_in_real_time(daemon, mosaic):
    run_id, player, keymap = start(mosaic, "VizdoomBasic-v1", "--steps", "40", "--set", "rate=10")
    assert keymap["mode"] == "realtime" and keymap["actions"][keymap["noop"]] == "NOOP"
    player.call(P.ACT, run=run_id, seat="0", action=keymap["keys"]["space"])
    plays = finish(mosaic, run_id, player)
    names = [e["action_name"] for e in plays]
    assert len(plays) == 40 and "ATTACK" in names and names[-1] == "NOOP"   # the key held, then released


@pytest.mark.long   # mosaic_multigrid's numba functions compile in a fresh home (~20 s and more)
@needs("mosaic_multigrid")
def test_a_multigrid_solo_drill_is_played_from_the_keys(daemon, mosaic):
    run_id, player, keymap = start(mosaic, "MosaicMultiGrid-S-G-1v0-v1", "--steps", "2")
    assert named(keymap)["up"] == "forward" and named(keymap)["n"] == "noop"
    for key in ("left", "up"):
        player.call(P.ACT, run=run_id, seat="0", action=keymap["keys"][key])
    plays = finish(mosaic, run_id, player)
    assert [e["action_name"] for e in plays] == ["left", "forward"]
