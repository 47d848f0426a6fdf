"""PettingZoo classic board games (chess, connect four, go, tic-tac-toe) as text for LLM agents.

Each game gives a model three things: the board as text from the mover's side,
the legal moves by name (the prompt lists them; a constrained backend chooses
among exactly these), and the map from a move's name back to the env's action:

    moves = legal_moves(env_id, env, agent)          # {"e2e4": 877, ...} in the env's own order
    text = board_text(env_id, env, agent)
    env.step(moves[reply.action])

Move names: chess in UCI ("e2e4", "e7e8q"), connect four by column ("0".."6"),
go in GTP coordinates ("D4", "pass"), tic-tac-toe by cell ("0".."8", the board
text shows which cell is where). The names come from PettingZoo's own action
encoding (``chess_utils.action_to_move``, ``go.coords``), so a name always maps to
the action the env expects.

Worker processes only: imports pettingzoo and python-chess on first use.
"""
from __future__ import annotations

from typing import Any

GAMES = {
    "chess_v6": "chess",
    "connect_four_v3": "connect four",
    "go_v5": "go",
    "tictactoe_v3": "tic-tac-toe",
}
SEAT_NAMES = {
    "chess_v6": ("white", "black"),
    "connect_four_v3": ("X (first player)", "O (second player)"),
    "go_v5": ("black", "white"),
    "tictactoe_v3": ("X (first player)", "O (second player)"),
}


def make(env_id: str, render_mode: str | None = None, **kwargs: Any):
    """The PettingZoo AEC env of ``env_id``."""
    import importlib
    module = importlib.import_module(f"pettingzoo.classic.{env_id}")
    return module.env(render_mode=render_mode, **kwargs)


def _mask(env: Any, agent: str) -> list[int]:
    observation = env.observe(agent)
    return [int(a) for a, legal in enumerate(observation["action_mask"]) if legal]


def legal_moves(env_id: str, env: Any, agent: str) -> dict[str, int]:
    """The moves ``agent`` may make now, by name, each with its env action."""
    actions = _mask(env, agent)
    game = env.unwrapped
    if env_id == "chess_v6":
        from pettingzoo.classic.chess import chess_utils
        player = game.possible_agents.index(agent)
        return {chess_utils.action_to_move(game.board, a, player).uci(): a for a in actions}
    if env_id == "go_v5":
        from pettingzoo.classic.go import coords
        pass_action = game._N * game._N
        return {("pass" if a == pass_action else coords.to_gtp(coords.from_flat(a))): a for a in actions}
    return {str(a): a for a in actions}  # connect four columns, tic-tac-toe cells


def seat_name(env_id: str, env: Any, agent: str) -> str:
    """The side an agent plays, in the game's own words (chess: ``white`` or ``black``)."""
    return SEAT_NAMES[env_id][env.unwrapped.possible_agents.index(agent)]


def instructions(env_id: str, env: Any, agent: str, level: str = "L1") -> str:
    """The instruction prompt: the game, the side played, how moves are named."""
    game = GAMES[env_id]
    side = seat_name(env_id, env, agent)
    how = {
        "chess_v6": "Moves are in UCI notation: the from-square and the to-square, e.g. e2e4, g1f3; a promotion "
                    "adds the piece, e.g. e7e8q.",
        "connect_four_v3": "A move is the column (0-6, left to right) to drop your disc into. Four of your discs "
                           "in a row, column or diagonal win.",
        "go_v5": "A move is a point in GTP coordinates (a letter for the column, skipping I, and a row number "
                 "from the bottom, e.g. D4), or pass. Surround more territory than your opponent.",
        "tictactoe_v3": "A move is the number of an empty cell (0-8, as shown on the board). Three of your marks "
                        "in a row, column or diagonal win.",
    }[env_id]
    lines = [f"You are playing {game} as {side}.", how]
    if level in ("L2", "L3"):
        lines.append("Tips: win if you can in one move; otherwise block a move that would win for your opponent; "
                     "prefer moves that keep several ways of winning open.")
    lines.append("Answer with one legal move from the list.")
    return "\n".join(lines)


def board_text(env_id: str, env: Any, agent: str) -> str:
    """The position as text, with the side to move and the legal moves."""
    game = env.unwrapped
    if env_id == "chess_v6":
        board = game.board
        last = board.peek().uci() if board.move_stack else "none"
        text = (f"{board}\n(white pieces are upper case, black lower case; rank 8 at the top)\n"
                f"FEN: {board.fen()}\nLast move: {last}")
    elif env_id == "connect_four_v3":
        marks = {0: ".", 1: "X", 2: "O"}
        rows = [" ".join(marks[game.board[r * 7 + c]] for c in range(7)) for r in range(6)]
        text = "\n".join(rows + ["0 1 2 3 4 5 6"])
    elif env_id == "tictactoe_v3":
        # PettingZoo's squares are column-major: square i is column i // 3, row i % 3
        marks = {1: "X", 2: "O"}
        squares = game.board.squares
        rows = [" | ".join(marks.get(squares[col * 3 + row], str(col * 3 + row)) for col in range(3))
                for row in range(3)]
        text = "\n---------\n".join(rows) + "\n(an empty cell shows its number)"
    elif env_id == "go_v5":
        from pettingzoo.classic.go import coords
        n = game._N
        stones = game._go.board  # n x n: 1 black, -1 white, 0 empty; row 0 is GTP row n
        letters = [coords.to_gtp((0, col))[0] for col in range(n)]
        rows = [f"{n - r:2d} " + " ".join({1: "X", -1: "O"}.get(int(stones[r][c]), ".") for c in range(n))
                for r in range(n)]
        text = "\n".join(rows + ["   " + " ".join(letters), "(X black, O white)"])
    else:
        raise KeyError(env_id)
    moves = ", ".join(legal_moves(env_id, env, agent))
    return f"{text}\nYou play {seat_name(env_id, env, agent)}.\nLegal moves: {moves}"
