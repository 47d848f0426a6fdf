"""Env-to-text for the MOSAIC LLM worker: MultiGrid (both observation modes, three levels) and
PettingZoo classic (board text, legal moves by name mapped to the env's own actions). Real envs."""
from __future__ import annotations

import importlib.util
import os

import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from workers.sdk.llm import classic, multigrid  # noqa: E402

needs_chess = pytest.mark.skipif(importlib.util.find_spec("chess") is None,
                                 reason="python-chess (pettingzoo's chess dependency) is not installed")


@pytest.fixture(scope="module")
def soccer():
    import gymnasium as gym
    import mosaic_multigrid  # noqa: F401  (registers the ids)
    env = gym.make("MosaicMultiGrid-S-2v2-IndAgObs-v1", disable_env_checker=True)
    env.reset(seed=3)
    yield env.unwrapped
    env.close()


def _place(env, index: int, pos: tuple[int, int], heading: int) -> None:
    env.agents[index].state.pos = pos
    env.agents[index].state.dir = heading


def test_multigrid_egocentric_view_is_said_relative_to_the_heading(soccer):
    # agent 0 at (5, 5) facing east; opponent 2 one cell ahead; everything else far away
    _place(soccer, 0, (5, 5), 0)
    _place(soccer, 1, (12, 2), 0)
    _place(soccer, 2, (6, 5), 2)
    _place(soccer, 3, (12, 8), 0)
    text = multigrid.describe(soccer, 0, soccer.gen_obs()[0], "egocentric")
    assert "You are at column 5, row 5, facing east, carrying nothing." in text
    assert "- a blue agent 1 step ahead, facing west" in text
    # now facing north: the same opponent is to the right
    _place(soccer, 0, (5, 5), 3)
    _place(soccer, 2, (6, 5), 2)
    text = multigrid.describe(soccer, 0, soccer.gen_obs()[0], "egocentric")
    assert "facing north" in text and "- a blue agent 1 step to the right, facing west" in text


def test_visible_teammates_adds_only_teammates_in_view(soccer):
    _place(soccer, 0, (5, 5), 0)                 # facing east
    _place(soccer, 1, (7, 4), 1)                 # teammate: 2 ahead, 1 to the left, facing south
    _place(soccer, 2, (10, 9), 0)
    _place(soccer, 3, (12, 2), 0)
    obs = soccer.gen_obs()[0]
    ego = multigrid.describe(soccer, 0, obs, "egocentric")
    tom = multigrid.describe(soccer, 0, obs, "visible_teammates")
    assert "teammate agent 1" not in ego and "a green agent 2 steps ahead and 1 step to the left" in ego
    assert "- teammate agent 1 (green) 2 steps ahead and 1 step to the left, facing south, carrying nothing" in tom
    _place(soccer, 1, (3, 5), 1)                 # behind agent 0: out of its view
    tom = multigrid.describe(soccer, 0, soccer.gen_obs()[0], "visible_teammates")
    assert "teammate agent 1" not in tom and "- none in view" in tom


def test_multigrid_levels_and_roles(soccer):
    env_id = "MosaicMultiGrid-S-2v2-IndAgObs-v1"
    roles = multigrid.default_roles(soccer)
    assert roles == {0: "forward", 1: "defender", 2: "forward", 3: "defender"}
    l1 = multigrid.instructions(env_id, soccer, 2, "L1")
    l2 = multigrid.instructions(env_id, soccer, 2, "L2")
    l3 = multigrid.instructions(env_id, soccer, 3, "L3", roles[3])
    assert "Your team is blue (agent 3 with you)" in l1
    assert "The green goal (the other team's) is at column 1, rows 4-6." in l1
    assert "Tips" not in l1 and "Tips for coordination" in l2 and "role" not in l2.lower()
    assert "Your role: DEFENDER" in l3 and "Tips for coordination" in l3
    for name in multigrid.action_names():
        assert f"- {name}:" in l1


def test_tictactoe_cells_and_connect_four_columns():
    env = classic.make("tictactoe_v3")
    env.reset(seed=0)
    env.step(classic.legal_moves("tictactoe_v3", env, "player_1")["4"])       # X in the centre
    env.step(classic.legal_moves("tictactoe_v3", env, "player_2")["5"])       # O: column 1, row 2
    text = classic.board_text("tictactoe_v3", env, "player_1")
    assert text.splitlines()[:5] == ["0 | 3 | 6", "---------", "1 | X | 7", "---------", "2 | O | 8"]
    assert "Legal moves: 0, 1, 2, 3, 6, 7, 8" in text
    env = classic.make("connect_four_v3")
    env.reset(seed=0)
    env.step(classic.legal_moves("connect_four_v3", env, "player_0")["2"])
    text = classic.board_text("connect_four_v3", env, "player_1")
    assert text.splitlines()[5] == ". . X . . . ." and "You play O (second player)" in text


@needs_chess
def test_chess_moves_are_uci_for_both_sides():
    env = classic.make("chess_v6")
    env.reset(seed=0)
    white = classic.legal_moves("chess_v6", env, "player_0")
    assert set(white) == {m.uci() for m in env.unwrapped.board.legal_moves}
    env.step(white["e2e4"])
    black = classic.legal_moves("chess_v6", env, "player_1")   # PettingZoo mirrors black's actions
    assert set(black) == {m.uci() for m in env.unwrapped.board.legal_moves} and "e7e5" in black
    env.step(black["e7e5"])
    assert str(env.unwrapped.board.peek()) == "e7e5"
    assert "Last move: e7e5" in classic.board_text("chess_v6", env, "player_0")


def test_go_moves_are_gtp_points_and_pass():
    env = classic.make("go_v5", board_size=5)
    env.reset(seed=0)
    moves = classic.legal_moves("go_v5", env, "black_0")
    assert len(moves) == 26 and "pass" in moves and "A5" in moves and "E1" in moves
    env.step(moves["B4"])
    text = classic.board_text("go_v5", env, "white_0")
    assert text.splitlines()[1] == " 4 . X . . ." and "B4" not in text.split("Legal moves:")[1]
