"""Human seats in MOSAIC LLM matches, through the real daemon and real envs (docs/play.md, "Seats among
agents"): a client takes an agent's seat and sends its moves with `act`; the worker says when it waits,
refuses an illegal move with the legal ones, and steps only on legal moves.

- chess against Stockfish at level 0: typed SAN (and one UCI) moves, an illegal one refused, no move lost;
- MultiGrid soccer 1v1 against a random seat: the human's actions and the random seat's seeded draws;
- soccer 1v1 against an LLM seat (a local OpenAI-compatible endpoint whose calls may take 1 s): the person
  thinks longer than that before each action, and no LLM call times out;
- tic-tac-toe with two human seats held by two clients; a human seat in a cluster placement refused;
- (long: its fixture trains an RLlib policy) tic-tac-toe against an RLlib checkpoint.
"""
from __future__ import annotations

import importlib.util
import json
import random
import time

import pytest

from daemon import protocol as P
from tests.helpers import connect, wait_for
from tests.plugins.llm_fault_server import FaultServer
from tests.workers.mosaic_llm_worker.test_mosaic_llm_worker import _config, _policy_reply, finish, submit
from workers.mosaic_llm_worker import WORKER
from workers.sdk.config import ConfigError
from workers.sdk.telemetry import check_event

needs_chess = pytest.mark.skipif(importlib.util.find_spec("chess") is None or not WORKER.capabilities()["stockfish"],
                                 reason="python-chess or the stockfish engine is not installed")
SOCCER_1V1 = "MosaicMultiGrid-S-1v1-IndAgObs-v1"
ACTIONS = ["noop", "left", "right", "forward", "pickup", "drop", "toggle", "done"]
KEY = "sk-planted-human-seats-77"


def events_of(home, run_id: str) -> list[dict]:
    """The run's events so far (whole lines: the worker may be writing the next)."""
    text = (home.run_dir(run_id) / "events.jsonl").read_text()
    return [check_event(json.loads(line)) for line in text[:text.rfind("\n") + 1].splitlines()]


def plays(home, run_id: str, seat: str) -> list[dict]:
    return [e for e in events_of(home, run_id) if e["type"] == "play" and e["seat"] == seat]


def moves_of(home, run_id: str) -> list[dict]:
    path = home.run_dir(run_id) / "moves.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def take_seat(client, run_id: str, seat: str, timeout: float = 90) -> dict:
    """The seat, once the run listens (its control pipe exists from its start)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return client.call(P.SEAT, run=run_id, seat=seat)
        except Exception as exc:  # noqa: BLE001 -- not listening yet
            if "not listening" not in str(exc) and "no human seat" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def awaited(home, run_id: str, seat: str, step: int, timeout: float = 90) -> dict:
    """The play event saying the run waits for ``seat`` at ``step``."""
    return wait_for(lambda: next((e for e in plays(home, run_id, seat) if e.get("waiting") and e["step"] == step
                                  and not e.get("refused")), None), timeout, 0.05, what=f"{seat} awaited at {step}")


def refused(home, run_id: str, seat: str, count: int = 1) -> dict:
    return wait_for(lambda: ([e for e in plays(home, run_id, seat) if e.get("refused")] + [None] * count)[count - 1],
                    60, 0.05, what="a refusal")


# -- validation -----------------------------------------------------------------------------------
def test_human_seats_are_checked():
    checked = WORKER.validate(_config(seats=["human", "human"]))      # two people: a client each (or one)
    assert [s["kind"] for s in checked["params"]["seats"]] == ["human", "human"]
    assert checked["frames"]["enabled"]                                 # a person sees the board
    assert WORKER.validate(_config(SOCCER_1V1, seats=["human", "random"]))["params"]["seats"][0] == {"kind": "human"}
    for seats, field in ((["llm", "human:alice"], "params.seats[1]"),
                         (["llm", {"kind": "human", "level": 3}], "params.seats[1].level")):
        with pytest.raises(ConfigError) as err:
            WORKER.validate(_config(seats=seats))
        assert err.value.field == field
    with pytest.raises(ConfigError) as err:
        WORKER.validate({**_config(seats=["random", "human"]), "placement": {"backend": "slurm"}})
    assert err.value.field == "params.seats[1]" and "placement is local" in err.value.message
    assert "\n" not in str(err.value)
    assert WORKER.capabilities()["human"]
    with pytest.raises(ConfigError, match="choose from llm, random, stockfish, checkpoint, human"):
        WORKER.validate(_config(seats=["llm", "person"]))


# -- chess: typed moves against Stockfish -----------------------------------------------------------
@needs_chess
def test_chess_typed_moves_against_stockfish(daemon, mosaic):
    """Ten plies (or the game's end): the human's SAN moves (one in UCI), Stockfish's replies; an illegal
    move is refused with the legal ones listed, and moves.jsonl holds exactly the moves played."""
    import chess

    home = mosaic.home
    run_id = submit(mosaic, "chess_v6", 'seats=["human", "stockfish:0"]', "max_steps=10")
    player = connect(home, name="player")
    watcher = connect(home, name="watcher")
    try:
        assert take_seat(player, run_id, "player_0")["held_by"].startswith("player#")
        with pytest.raises(Exception, match=r"held by player#"):
            watcher.call(P.ACT, run=run_id, seat="player_0", action="e4")
        keymap = next(e for e in events_of(home, run_id) if e["type"] == "keymap")
        assert keymap["seat"] == "player_0" and keymap["text"] is True and keymap["mode"] == "turn"
        first = awaited(home, run_id, "player_0", 0)
        assert "white to move" in first["message"]
        player.call(P.ACT, run=run_id, seat="player_0", action="Ke2")     # the pawn on e2 is in the way
        refusal = refused(home, run_id, "player_0")
        assert "'Ke2' is not a legal move of white" in refusal["message"] and refusal["waiting"]
        assert refusal["step"] == 0 and len(refusal["legal"]) == 20 and {"e4", "Nf3"} <= set(refusal["legal"])
        board, sent = chess.Board(), []
        for ply in range(0, 10, 2):
            wait = wait_for(lambda: next((e for e in plays(home, run_id, "player_0") if e.get("ended") or (
                e.get("waiting") and e["step"] == ply)), None), 90, 0.05, what=f"white's move {ply}")
            if wait.get("ended"):   # Stockfish mated us: the game's own end
                break
            for line in moves_of(home, run_id)[len(board.move_stack):]:   # Stockfish's reply, on our board
                board.push_uci(line["moves"]["player_1"])
            assert wait["legal"] == sorted(board.san(m) for m in board.legal_moves)
            san = "e4" if ply == 0 else wait["legal"][ply % len(wait["legal"])]
            move = board.parse_san(san)
            typed = move.uci() if ply == 2 else san                       # UCI is taken too
            player.call(P.ACT, run=run_id, seat="player_0", action=typed)
            sent.append(move.uci())
            board.push(move)
        run = finish(mosaic, run_id)
    finally:
        player.close()
        watcher.close()
    assert run["state"] == "succeeded"
    moves = moves_of(home, run_id)
    assert [line["step"] for line in moves] == list(range(len(moves)))
    assert len(moves) == 10 or chess.Board(replay_fen(moves)).is_checkmate()
    assert [line["moves"]["player_0"] for line in moves[0::2]] == sent            # none lost, none twice
    # the refused Ke2 was not played: white's first move is the e4 sent after it (a later ply may
    # choose Ke2 itself, legal once the pawn has gone)
    assert moves[0]["moves"]["player_0"] == "e2e4" and moves[0].get("typed", {}).get("player_0") == "e4"
    replay = chess.Board()
    for line in moves:
        (seat, uci), = line["moves"].items()
        assert seat == ("player_0" if replay.turn == chess.WHITE else "player_1")
        assert chess.Move.from_uci(uci) in replay.legal_moves
        replay.push_uci(uci)
    played = [e for e in plays(home, run_id, "player_0") if "action" in e]
    assert [e["action_name"] for e in played][:1] == ["e4"] and len(played) == len(sent)
    assert plays(home, run_id, "player_0")[-1]["ended"]


def replay_fen(moves: list[dict]) -> str:
    import chess

    board = chess.Board()
    for line in moves:
        board.push_uci(next(iter(line["moves"].values())))
    return board.fen()


# -- MultiGrid: simultaneous moves ------------------------------------------------------------------
def test_soccer_1v1_the_human_against_a_random_seat(daemon, mosaic):
    """Each step: the random seat's action is drawn, the human's awaited, then the env steps; moves.jsonl
    has both agents' actions, the human's as sent (by number or name), the random seat's its seeded draws."""
    home = mosaic.home
    run_id = submit(mosaic, SOCCER_1V1, 'seats=["human", "random"]', "max_steps=4", extra=("--seed", "3"))
    player = connect(home, name="player")
    sent = [3, "left", 3, "forward"]
    try:
        take_seat(player, run_id, "0")
        keymap = wait_for(lambda: [e for e in events_of(home, run_id) if e["type"] == "keymap"], 60, 0.1,
                          what="the keymap")[0]
        assert keymap["actions"] == ACTIONS and keymap["keys"]["up"] == 3 and keymap["noop"] == 0
        first = awaited(home, run_id, "0", 0)
        assert first["waiting_for"] == ["0"] and first["legal"] == ACTIONS
        player.call(P.ACT, run=run_id, seat="0", action="jump")
        assert "'jump' is not an action" in refused(home, run_id, "0")["message"]
        player.call(P.ACT, run=run_id, seat="0", action=99)
        assert refused(home, run_id, "0", 2)["step"] == 0
        for step, action in enumerate(sent):
            awaited(home, run_id, "0", step)
            player.call(P.ACT, run=run_id, seat="0", action=action)
        finish(mosaic, run_id)
    finally:
        player.close()
    moves = moves_of(home, run_id)
    names = [a if isinstance(a, str) else ACTIONS[a] for a in sent]
    assert [line["moves"]["0"] for line in moves] == names
    draws = random.Random(3 * 1000 + 1)
    assert [line["moves"]["1"] for line in moves] == [draws.choice(ACTIONS) for _ in sent]
    assert [line["typed"]["0"] for line in moves] == sent
    stepped = [e for e in plays(home, run_id, "0") if "action" in e]
    assert [e["action_name"] for e in stepped] == names and all("reward" in e for e in stepped)


def test_an_llm_call_is_not_timed_by_the_humans_thinking(daemon, mosaic):
    """Soccer 1v1, the human against an LLM seat whose calls may take 1 s: the LLM's move is asked before
    the human is awaited, and the person's 2.5 s of thought before each action never times a call out."""
    from workers.sdk.llm import keys

    home = mosaic.home
    keys.write_key("MOSAIC_TEST_KEY", KEY, home=str(home.root))
    with FaultServer(text="forward") as server:
        llm = {"kind": "llm", "llm": {"backend": "openai", "base_url": server.base_url, "model": "fault-model",
                                      "api_key_env": "MOSAIC_TEST_KEY", "timeout_s": 1, "retries": 0}}
        run_id = submit(mosaic, SOCCER_1V1, f"seats={json.dumps(['human', llm])}", "max_steps=2", "on_error=fail")
        player = connect(home, name="player")
        try:
            take_seat(player, run_id, "0")
            for step in range(2):
                awaited(home, run_id, "0", step)
                time.sleep(2.5)                                   # thinking, longer than an LLM call may take
                player.call(P.ACT, run=run_id, seat="0", action="right")
            finish(mosaic, run_id)
        finally:
            player.close()
        assert len(server.requests) == 2
    events = events_of(home, run_id)
    calls = [e for e in events if e["type"] == "llm_step" and not e.get("partial")]
    assert [c["step"] for c in calls] == [0, 1] and all(c["valid"] and not c.get("error") for c in calls)
    assert all(c["latency_s"] < 1 for c in calls)
    waits = [e for e in events if e["type"] == "play" and e.get("waiting") and not e.get("refused")]
    for call in calls:   # the agent's move came first, then the human was awaited
        assert call["t"] <= min(w["t"] for w in waits if w["step"] == call["step"])
    assert [line["moves"] for line in moves_of(home, run_id)] == [{"0": "right", "1": "forward"}] * 2


# -- two people; a cluster placement ------------------------------------------------------------------
def test_two_human_seats_two_clients_and_no_cluster_placement(daemon, mosaic):
    """Tic-tac-toe between two clients, one seat each (X takes the top row); a human seat placed on a
    cluster is refused at submit in one line."""
    home = mosaic.home
    out = mosaic.run("submit", "--worker", "mosaic_llm", "--algo", "play", "--env", "tictactoe_v3",
                     "--placement", "slurm", "--set", 'seats=["human", "random"]')
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1
    assert "params.seats[0]: a human seat is played from a client of this daemon" in out.stderr
    run_id = submit(mosaic, "tictactoe_v3", 'seats=["human", "human"]')
    x, o = connect(home, name="x"), connect(home, name="o")
    try:
        take_seat(x, run_id, "player_1")
        take_seat(o, run_id, "player_2")
        with pytest.raises(Exception, match=r"held by x#"):
            o.call(P.ACT, run=run_id, seat="player_1", action=4)
        keymaps = [e for e in events_of(home, run_id) if e["type"] == "keymap"]
        assert [k["seat"] for k in keymaps] == ["player_1", "player_2"]
        assert keymaps[0]["keys"]["4"] == 4 and keymaps[0]["text"]
        # PettingZoo numbers the cells column by column: 0, 3, 6 is the top row
        for step, (client, seat, cell) in enumerate([(x, "player_1", 0), (o, "player_2", 1), (x, "player_1", 3),
                                                     (o, "player_2", 4), (x, "player_1", "6")]):
            awaited(home, run_id, seat, step)
            if step == 2:
                client.call(P.ACT, run=run_id, seat=seat, action=1)         # taken by O: refused
                assert "cell 1 is taken" in refused(home, run_id, seat)["message"]
            client.call(P.ACT, run=run_id, seat=seat, action=cell)
        finish(mosaic, run_id)
    finally:
        x.close()
        o.close()
    assert [line["moves"] for line in moves_of(home, run_id)] == [
        {"player_1": "0"}, {"player_2": "1"}, {"player_1": "3"}, {"player_2": "4"}, {"player_1": "6"}]
    endings = {seat: plays(home, run_id, seat)[-1] for seat in ("player_1", "player_2")}
    assert endings["player_1"]["ended"] and "win" in endings["player_1"]["message"]
    assert endings["player_2"]["return"] == -1 and "loss" in endings["player_2"]["message"]


# -- an RLlib checkpoint ------------------------------------------------------------------------------
@pytest.mark.long
@pytest.mark.ray   # its fixture starts a private Ray cluster
@pytest.mark.slow  # its fixture trains an RLlib policy
def test_tictactoe_against_an_rllib_checkpoint(daemon, mosaic, tictactoe_checkpoint):
    """The human (X) against a ray-worker checkpoint: the policy's reply to the first move is its greedy
    action, as the ray worker's eval code plays it; the game is played out on the legal cells."""
    home = mosaic.home
    run_id = submit(mosaic, "tictactoe_v3", f'seats=["human", "checkpoint:{tictactoe_checkpoint}"]')
    player = connect(home, name="player")
    try:
        take_seat(player, run_id, "player_1")
        step = 0
        while not any(e["type"] == "episode" for e in events_of(home, run_id)):
            try:
                wait = awaited(home, run_id, "player_1", step, timeout=5)
            except Exception:  # noqa: BLE001 -- the policy ended the game
                continue
            player.call(P.ACT, run=run_id, seat="player_1", action=4 if step == 0 else wait["legal"][0])
            step += 2
        finish(mosaic, run_id)
    finally:
        player.close()
    moves = moves_of(home, run_id)
    assert moves[0]["moves"] == {"player_1": "4"}
    assert int(moves[1]["moves"]["player_2"]) == _policy_reply(tictactoe_checkpoint, 4)
    cells = [next(iter(line["moves"].values())) for line in moves]
    assert len(set(cells)) == len(cells) >= 5    # every move on a free cell


@pytest.mark.long
@pytest.mark.ray   # trains an RLlib policy on a private Ray first
@pytest.mark.slow
def test_connect_four_against_an_rllib_checkpoint(daemon, mosaic):
    """The human (player_0, first) against a ray-worker checkpoint of connect four: columns typed, one
    the board does not have refused with the open ones, the game played out; every move of both
    seats in moves.jsonl."""
    home = mosaic.home
    trained = mosaic.submit("--worker", "ray", "--algo", "PPO", "--env", "connect_four_v3", "--steps", "200",
                            "--set", "train_batch_size_per_learner=200", "--set", "minibatch_size=100",
                            "--set", "num_epochs=1", "--set", "fcnet_hiddens=[16]", "--set", "env_runners=0")
    finish(mosaic, trained)
    checkpoint = str(home.run_dir(trained) / "checkpoints" / "final")
    run_id = submit(mosaic, "connect_four_v3", f'seats=["human", "checkpoint:{checkpoint}"]')
    player = connect(home, name="player")
    sent: list[str] = []
    try:
        take_seat(player, run_id, "player_0")
        step, deadline = 0, time.monotonic() + 240
        while not any(e["type"] == "episode" for e in events_of(home, run_id)):
            assert time.monotonic() < deadline, plays(home, run_id, "player_0")[-3:]
            try:
                wait = awaited(home, run_id, "player_0", step, timeout=5)
            except Exception:  # noqa: BLE001 -- the policy ended the game
                continue
            if step == 0:   # a board has columns 0 to 6: 9 is refused with the open ones, nothing played
                player.call(P.ACT, run=run_id, seat="player_0", action="9")
                refusal = refused(home, run_id, "player_0")
                assert refusal["legal"] == [str(c) for c in range(7)] and refusal["step"] == 0, refusal
            column = "3" if "3" in wait["legal"] else wait["legal"][0]   # the middle until it is full
            player.call(P.ACT, run=run_id, seat="player_0", action=column)
            sent.append(column)
            step += 2
        finish(mosaic, run_id)
    finally:
        player.close()
    moves = moves_of(home, run_id)
    mine = [line["moves"]["player_0"] for line in moves if "player_0" in line["moves"]]
    theirs = [line["moves"]["player_1"] for line in moves if "player_1" in line["moves"]]
    assert mine == sent and len(theirs) in (len(sent) - 1, len(sent))


@pytest.mark.long
@pytest.mark.ray   # its fixture starts a private Ray cluster
@pytest.mark.slow  # its fixture trains an RLlib policy
def test_an_rllib_evaluation_hands_one_agent_to_the_human(daemon, mosaic, tictactoe_checkpoint):
    """The ray worker's eval of a multi-agent checkpoint with params.human_agent: player_1 is the
    person's, player_2 the checkpoint's policy; a taken cell is refused with the legal ones, the
    env does not step, and the game is played out."""
    home = mosaic.home
    path = home.root / "human-eval.json"
    path.write_text(json.dumps({"worker": "ray", "algo": "PPO", "env": "tictactoe_v3", "mode": "eval",
                                "checkpoint": tictactoe_checkpoint, "eval_episodes": 1,
                                "params": {"human_agent": "player_1", "fcnet_hiddens": [16]}}))
    run_id = mosaic.submit(str(path))
    player = connect(home, name="player")
    try:
        take_seat(player, run_id, "player_1")
        keymap = wait_for(lambda: next((e for e in events_of(home, run_id) if e["type"] == "keymap"), None), 60, 0.1,
                          what="the keymap")
        assert keymap["seat"] == "player_1" and len(keymap["actions"]) == 9
        first = wait_for(lambda: next((e for e in plays(home, run_id, "player_1") if e.get("waiting")), None), 90,
                         0.05, what="the person awaited")
        player.call(P.ACT, run=run_id, seat="player_1", action=4)
        sent = [4]
        second = wait_for(lambda: next((e for e in plays(home, run_id, "player_1") if e.get("waiting")
                                        and e["step"] > first["step"]), None), 30, 0.05, what="the next turn")
        assert "4" not in second["legal"]
        player.call(P.ACT, run=run_id, seat="player_1", action=4)     # taken: refused, nothing lost
        assert "not a legal action" in refused(home, run_id, "player_1")["message"]
        while not any(e["type"] == "episode" for e in events_of(home, run_id)):
            waiting = [e for e in plays(home, run_id, "player_1") if e.get("waiting") and not e.get("refused")]
            if waiting and len(waiting) > len(sent) and waiting[-1]["legal"]:
                sent.append(int(waiting[-1]["legal"][0]))
                player.call(P.ACT, run=run_id, seat="player_1", action=sent[-1])
            time.sleep(0.05)
        finish(mosaic, run_id)
    finally:
        player.close()
    moved = [e["action"] for e in plays(home, run_id, "player_1") if "action" in e]
    assert moved == sent and len(set(moved)) == len(moved)


@pytest.mark.long
@pytest.mark.slow  # trains a XuanCe IQL policy first
def test_a_xuance_evaluation_hands_one_agent_to_the_human(daemon, mosaic):
    """XuanCe's own evaluation loop of an IQL checkpoint on MPE simple_spread (discrete actions: a
    person's keys), with agent_0 played by a person: an action the env does not have is refused,
    the others are taken as sent."""
    home = mosaic.home
    trained = mosaic.submit("--worker", "xuance", "--algo", "iql", "--env", "simple_spread_v3", "--steps", "500",
                            "--set", "parallels=2", "--name", "iql-for-a-person")
    finish(mosaic, trained)
    path = home.root / "xuance-human.json"
    path.write_text(json.dumps({"worker": "xuance", "algo": "iql", "env": "simple_spread_v3", "mode": "eval",
                                "checkpoint": "run:iql-for-a-person", "eval_episodes": 1,
                                "params": {"human_agent": "agent_0", "env_kwargs": {"max_cycles": 5}}}))
    run_id = mosaic.submit(str(path))
    sent = [1, 2, 3, 4, 0]
    player = connect(home, name="player")
    try:
        take_seat(player, run_id, "agent_0")
        for index, action in enumerate(sent):
            wait_for(lambda: len([e for e in plays(home, run_id, "agent_0") if e.get("waiting")
                                  and not e.get("refused")]) > index, 120, 0.05, what=f"move {index} awaited")
            if index == 0:
                player.call(P.ACT, run=run_id, seat="agent_0", action=9)   # MPE has 5 actions
                assert "not a legal action" in refused(home, run_id, "agent_0")["message"]
            player.call(P.ACT, run=run_id, seat="agent_0", action=action)
        finish(mosaic, run_id)
    finally:
        player.close()
    assert [e["action"] for e in plays(home, run_id, "agent_0") if "action" in e] == sent
    assert len([e for e in events_of(home, run_id) if e["type"] == "episode"]) == 1
