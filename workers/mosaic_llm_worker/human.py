"""A ``human`` seat of a MOSAIC LLM match: its moves come from the client that holds it (docs/play.md).

The run's control pipe (workers/sdk/control.py, one for every human seat of the run) carries the
held seat's ``act`` messages, the seat named as the run names its agent (``player_0``, ``0``).
Each time the seat must move it writes a ``play`` event, ``waiting: true``, with the legal moves in
the env's own notation, and waits for ever (a seat nobody holds is paused: the episode waits); a
move that is not legal is refused (a ``play`` with ``refused: true``, why, and the legal moves) and
the seat waits again: the env never steps on it. What the person types:

- chess: SAN (``e4``, ``Nf3``, ``O-O``, ``exd5``, ``e8=Q``) or UCI (``e2e4``, ``e7e8q``); ``legal`` in SAN;
- tic-tac-toe: the cell's number (0-8, as the board shows them); connect four: the column (0-6);
  a number or its text;
- go: a point in GTP coordinates (``D4``, any case) or ``pass``;
- MultiGrid: the action's number or name (``forward``); the ``keymap`` puts them on keys.
"""
from __future__ import annotations

from typing import Any, Callable

from workers.sdk.control import ACT, Controls

IDLE_S = 1.0   # how often a waiting seat beats the run's heart and looks for a stop

# MultiGrid's actions by name (mosaic_multigrid's Action), on the keys MiniGrid's play uses
MULTIGRID_KEYS = {"noop": ["n", "."], "left": ["left"], "right": ["right"], "forward": ["up"], "pickup": ["p"],
                  "drop": ["d"], "toggle": ["space", "t"], "done": ["enter"]}
BOARD_CELLS = {"tictactoe_v3": 9, "connect_four_v3": 7}
HOW = {
    "chess_v6": "type a move in SAN (e4, Nf3, O-O) or UCI (e2e4)",
    "connect_four_v3": "type the column (0-6) to drop your disc into",
    "go_v5": "type a point (D4) or pass",
    "tictactoe_v3": "type the number of an empty cell (0-8)",
}


def keymap(env_id: str, action_names: list[str] | None = None) -> dict[str, Any]:
    """The seat's controls, as the ``keymap`` event gives them: {"actions", "keys", "text", "noop"}."""
    if action_names is not None:   # MultiGrid: one action per key, all steps at once
        index = {name: i for i, name in enumerate(action_names)}
        keys = {key: index[name] for name, bound in MULTIGRID_KEYS.items() if name in index for key in bound}
        return {"actions": list(action_names), "keys": keys, "text": False, "noop": index.get("noop")}
    cells = BOARD_CELLS.get(env_id)
    if cells:   # the digit keys are the cells / columns; the number may be typed too
        return {"actions": [str(i) for i in range(cells)], "keys": {str(i): i for i in range(cells)},
                "text": True, "noop": None}
    return {"actions": [], "keys": {}, "text": True, "noop": None}   # chess, go: typed moves only


# -- moves in the env's notation ---------------------------------------------------------------
def shown(env_id: str, env: Any, legal: dict[str, int]) -> list[str]:
    """The legal moves as the person reads and types them (chess: SAN, sorted)."""
    if env_id == "chess_v6":
        import chess

        board = env.unwrapped.board
        return sorted(board.san(chess.Move.from_uci(name)) for name in legal)
    return list(legal)


def san(env: Any, uci: str) -> str:
    """A chess move (UCI, legal now) in SAN."""
    import chess

    return env.unwrapped.board.san(chess.Move.from_uci(uci))


def last_move(env_id: str, env: Any) -> str | None:
    """The move just played on a chess board, in SAN (None: none yet, or not chess)."""
    if env_id != "chess_v6":
        return None
    board = env.unwrapped.board.copy()
    if not board.move_stack:
        return None
    move = board.pop()
    return board.san(move)


def read_move(env_id: str, env: Any, legal: dict[str, int], typed: Any) -> tuple[str | None, str]:
    """The legal move's name (a key of ``legal``) for what the person sent, or (None, why not)."""
    if env_id == "chess_v6":
        return _read_chess(env, legal, typed)
    if isinstance(typed, bool) or not isinstance(typed, (int, str)):
        return None, f"{typed!r} is not a move: {HOW[env_id]}"
    text = str(typed).strip()
    if env_id == "go_v5":
        name = text.upper() if text.lower() != "pass" else "pass"
        if name in legal:
            return name, ""
        return None, f"{text!r} is not a legal move here: {HOW[env_id]}"
    if text in legal:
        return text, ""
    what = "cell" if env_id == "tictactoe_v3" else "column"
    if text.isdigit() and int(text) < BOARD_CELLS[env_id]:
        return None, f"{what} {text} is {'taken' if what == 'cell' else 'full'}: {HOW[env_id]}"
    return None, f"{text!r} is not a {what}: {HOW[env_id]}"


def _read_chess(env: Any, legal: dict[str, int], typed: Any) -> tuple[str | None, str]:
    import chess

    board = env.unwrapped.board
    side = "white" if board.turn == chess.WHITE else "black"
    if not isinstance(typed, str) or not typed.strip():
        return None, f"{typed!r} is not a move: {HOW['chess_v6']}"
    text = typed.strip()
    try:
        move = board.parse_san(text)
    except chess.AmbiguousMoveError:
        return None, f"{text!r} is ambiguous: say which piece (as in Nbd2, R1e2)"
    except ValueError:   # not SAN, or SAN of an illegal move: UCI, maybe
        try:
            move = chess.Move.from_uci(text.lower())
        except ValueError:
            move = None
        if move is None or move not in board.legal_moves:
            return None, f"{text!r} is not a legal move of {side} here ({HOW['chess_v6']})"
    name = move.uci()
    if name not in legal:   # python-chess and the env agree on the legal moves: should not happen
        return None, f"{text!r} is not among the env's legal moves"
    return name, ""


def read_action(names: list[str], typed: Any) -> tuple[str | None, str]:
    """A MultiGrid action: its number or its name."""
    if isinstance(typed, int) and not isinstance(typed, bool) and 0 <= typed < len(names):
        return names[typed], ""
    if isinstance(typed, str) and typed.strip().lower() in names:
        return typed.strip().lower(), ""
    return None, f"{typed!r} is not an action: 0-{len(names) - 1} or a name ({', '.join(names)})"


# -- the seat -----------------------------------------------------------------------------------
class Humans:
    """The run's control pipe, shared by its human seats (created when a seat is human)."""

    def __init__(self, run_dir: str = "."):
        self.controls = Controls(run_dir)

    def drain(self) -> None:
        """Read what arrived (who holds which seat), keeping every act for its seat's turn."""
        for message in self.controls.poll(0.0):
            if message.get("type") == ACT:
                self.controls.waiting.append(message)

    def held_by(self, seat: str) -> str | None:
        return self.controls.seats.get(seat)

    def close(self) -> None:
        self.controls.close()


class Waiter:
    """One human seat's wait for its move: ``tell`` writes its ``play`` events, ``wait`` blocks until a
    legal move came (refusing the others), beating the heart and looking for a stop while it waits."""

    def __init__(self, humans: Humans, seat_id: str, emitter):
        self.humans, self.seat_id, self.emitter = humans, seat_id, emitter

    def tell(self, step: int, episode: int, **fields: Any) -> None:
        self.humans.drain()   # who holds the seat now
        self.emitter.play(step, episode, self.seat_id, held_by=self.humans.held_by(self.seat_id), **fields)

    def wait(self, step: int, episode: int, read: Callable[[Any], tuple[str | None, str]], legal: list[str],
             check_stop: Callable[[], None], **shown: Any) -> tuple[str, Any]:
        """(the move's name, what was typed). ``shown``: the waiting event's fields (message,
        waiting_for, return), repeated in a refusal's and when the seat changes hands."""
        controls = self.humans.controls
        while True:
            check_stop()
            seen = self.humans.held_by(self.seat_id)
            message = controls.next_action(self.seat_id, IDLE_S)
            if self.humans.held_by(self.seat_id) != seen:   # taken, or left: the seat waits, paused
                self.tell(step, episode, waiting=True, legal=legal, **shown)
            if message is None:
                self.emitter.heartbeat(step, every=IDLE_S)
                continue
            typed = message.get("action")
            if typed is None:   # a key released: nothing in turn play
                continue
            name, why = read(typed)
            if name is None:   # refused: the env does not step, the seat waits again
                self.tell(step, episode, waiting=True, refused=True, legal=legal,
                          **{**shown, "message": why})
                continue
            return name, typed
