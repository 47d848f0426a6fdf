"""What the MOSAIC LLM worker plays, as data: envs, seats, the params' schema, seat checks.

Imported by the descriptor (the daemon): standard library only. MultiGrid ids
are read from the installed mosaic-multigrid package's registration file as
text, never by importing it (it imports numba and gymnasium).
"""
from __future__ import annotations

import os
import re
import shutil
from typing import Any

from workers.sdk.config import SCHEMA_DIALECT, ConfigError, did_you_mean
from workers.sdk.descriptor import module_available, package_dirs

SCHEMA_VERSION = 1
ALGORITHMS = ["play"]

CLASSIC = {
    # env id: (game, module python-side needs, seat ids)
    "chess_v6": ("chess", "chess", ("player_0", "player_1")),
    "connect_four_v3": ("connect four", None, ("player_0", "player_1")),
    "go_v5": ("go", None, ("black_0", "white_0")),
    "tictactoe_v3": ("tic-tac-toe", None, ("player_1", "player_2")),
}
AGENT_KINDS = ("llm", "random", "stockfish", "checkpoint")   # capabilities' seat_kinds: the agents
SEAT_KINDS = AGENT_KINDS + ("human",)   # and a person (capabilities' "human": true)
LEVELS = ("L1", "L2", "L3")
OBSERVATION_MODES = ("egocentric", "visible_teammates")
ROLES = ("forward", "defender")
STOCKFISH_PATHS = ("/usr/games/stockfish", "/usr/bin/stockfish")


def multigrid_envs() -> list[str]:
    """The MosaicMultiGrid-* ids the installed package registers (read from its source, not imported)."""
    for folder in package_dirs("mosaic_multigrid"):
        path = os.path.join(folder, "envs", "__init__.py")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return sorted(set(re.findall(r"'(MosaicMultiGrid-[A-Za-z0-9-]+-v\d+)'", f.read())))
    return []


def multigrid_agents(env_id: str) -> int:
    """Agents of a MultiGrid id: 1v1 -> 2, G-2v0 -> 2, solo (G-1v0) -> 1, C-IndAgObs (free-for-all) -> 3."""
    match = re.search(r"-(\d+)v(\d+)-", env_id)
    if match:
        return int(match.group(1)) + int(match.group(2))
    return 3


def classic_available(env_id: str) -> bool:
    return module_available("pettingzoo") and module_available(CLASSIC[env_id][1])


def known_envs() -> list[str]:
    return multigrid_envs() + [e for e in CLASSIC if classic_available(e)]


def env_family(env_id: str) -> str | None:
    if env_id in CLASSIC:
        return "classic"
    if env_id.startswith("MosaicMultiGrid-"):
        return "multigrid"
    return None


def seat_ids(env_id: str) -> list[str]:
    """Seat ids as telemetry names them: the MultiGrid agent index, the PettingZoo agent name."""
    if env_id in CLASSIC:
        return list(CLASSIC[env_id][2])
    return [str(i) for i in range(multigrid_agents(env_id))]


def stockfish_path() -> str | None:
    found = shutil.which("stockfish")
    if found:
        return found
    return next((p for p in STOCKFISH_PATHS if os.access(p, os.X_OK)), None)


SEAT_SCHEMA: dict[str, Any] = {
    "type": ["object", "string"],
    "description": "a seat: 'llm', 'random', 'stockfish', 'stockfish:<level>', 'checkpoint:<path>', 'human' "
                   "(the client that holds the seat plays it, docs/play.md), or an object "
                   "{kind, llm, level, movetime_ms, checkpoint, role}",
}


def schema(algo: str, env: str | None = None) -> dict[str, Any]:
    from workers.sdk.llm.client import SPEC_PARAMS
    from workers.sdk.llm.usage import BUDGET_PARAMS

    return {
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "title": "MOSAIC LLM: a series of episodes between seats",
        "x-schema-version": SCHEMA_VERSION,
        "properties": {
            "episodes": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 1,
                         "description": "episodes in the series (results and Elo ratings accumulate)"},
            "max_steps": {"type": ["integer", "null"], "minimum": 1, "default": 100,
                          "description": "an episode ends after this many env steps (MultiGrid: all agents "
                                         "act at once; board games: one move) as a draw; null: the game's "
                                         "own end"},
            "seats": {"type": "array", "items": SEAT_SCHEMA, "default": [],
                      "description": "one entry per agent, in the env's agent order; [] seats an LLM everywhere. An LLM "
                                         "seat uses the backend, model ... params below, or its own "
                                         "{\"kind\": \"llm\", \"llm\": {\"backend\": ...}}"},
            "coordination": {"type": "string", "enum": list(LEVELS), "default": "L1",
                             "description": "instruction prompt: L1 rules and actions only (emergent), L2 with "
                                            "cooperation hints, L3 with explicit roles (forward / defender)"},
            "observation_mode": {"type": "string", "enum": list(OBSERVATION_MODES), "default": "egocentric",
                                 "description": "MultiGrid: egocentric (own view only), or visible_teammates "
                                                "(adds each teammate in view: id, colour, heading, carried "
                                                "object)"},
            "concurrent": {"type": "boolean", "default": True,
                           "description": "query the LLM seats of one step concurrently (one thread each; a "
                                          "local model still answers one at a time)"},
            "on_error": {"type": "string", "enum": ["continue", "fail"], "default": "continue",
                         "description": "an LLM call that fails after its retries: the seat makes its fallback "
                                        "move (noop / a random legal move) and the run goes on, or the run fails"},
            "elo_k": {"type": "number", "exclusiveMinimum": 0, "maximum": 400, "default": 32,
                      "description": "Elo K-factor: rating points at stake per game"},
            "env_kwargs": {"type": "object", "default": {},
                           "description": "passed to the env's constructor (go: board_size; MultiGrid: view_size)"},
            # the run's token / cost budget over all its LLM seats (as balrog's)
            **BUDGET_PARAMS,
            # the LLM client spec of every LLM seat, flat as in the balrog worker; a seat's own "llm"
            # object overrides any of these keys for that seat
            **SPEC_PARAMS,
        },
    }


# -- seats -------------------------------------------------------------------------------------------

def parse_seat(raw: Any, field: str) -> dict[str, Any]:
    """A seat as an object with its kind; the string shorthands expanded."""
    if isinstance(raw, str):
        kind, _, arg = raw.partition(":")
        seat: dict[str, Any] = {"kind": kind}
        if arg:
            if kind == "stockfish":
                if not arg.isdigit():
                    raise ConfigError(field, f"stockfish:<level> takes a level 0-20, not {arg!r}")
                seat["level"] = int(arg)
            elif kind == "checkpoint":
                seat["checkpoint"] = arg
            else:
                raise ConfigError(field, f"{kind!r} takes no ':' argument")
    elif isinstance(raw, dict):
        seat = dict(raw)
        seat.setdefault("kind", "llm")
    else:
        raise ConfigError(field, "must be a string or an object")
    kind = seat["kind"]
    if kind not in SEAT_KINDS:
        raise ConfigError(f"{field}.kind" if isinstance(raw, dict) else field,
                          f"unknown seat kind {kind!r}{did_you_mean(str(kind), list(SEAT_KINDS)) or ''}; "
                          f"choose from {', '.join(SEAT_KINDS)}")
    allowed = {"kind", "role", "name"} | {"llm": {"llm"}, "random": set(), "stockfish": {"level", "movetime_ms"},
                                          "checkpoint": {"checkpoint", "module"}, "human": set()}[kind]
    for key in seat:
        if key not in allowed:
            raise ConfigError(f"{field}.{key}", f"is not a setting of a {kind} seat; its settings: "
                                                f"{', '.join(sorted(allowed))}")
    return seat


def check_seats(env_id: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Every seat of the run, normalised (kind, and its settings with defaults); ConfigError naming
    ``params.seats[i]...`` for a seat that cannot play this env."""
    from workers.sdk.llm.client import SpecError, normalise_spec, spec_from_params
    from workers.sdk.llm.usage import check_budget_params

    ids = seat_ids(env_id)
    raw = params["seats"] or ["llm"] * len(ids)
    if len(raw) != len(ids):
        raise ConfigError("params.seats", f"{env_id} has {len(ids)} seats ({', '.join(ids)}); {len(raw)} given")
    default_llm = spec_from_params(params)
    try:
        normalise_spec(default_llm)
    except SpecError as exc:
        raise ConfigError(f"params.{exc.field}", str(exc).split(": ", 1)[-1]) from None
    seats = []
    for index, entry in enumerate(raw):
        field = f"params.seats[{index}]"
        seat = parse_seat(entry, field)
        kind = seat["kind"]
        if "role" in seat and seat["role"] not in ROLES:
            raise ConfigError(f"{field}.role", f"must be one of {', '.join(ROLES)}")
        if kind == "llm":
            own = seat.get("llm", {})
            if not isinstance(own, dict):
                raise ConfigError(f"{field}.llm", "must be an object (an LLM client spec)")
            try:
                seat["llm"] = normalise_spec({**default_llm, **own})
            except SpecError as exc:
                raise ConfigError(f"{field}.llm.{exc.field}", str(exc).split(": ", 1)[-1]) from None
        elif kind == "stockfish":
            if env_id != "chess_v6":
                raise ConfigError(field, f"stockfish plays chess (chess_v6) only, not {env_id}")
            if stockfish_path() is None:
                raise ConfigError(field, "the stockfish engine is not installed (apt-get install stockfish)")
            level = seat.setdefault("level", 5)
            if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level <= 20:
                raise ConfigError(f"{field}.level", "must be an integer 0-20 (Stockfish's Skill Level)")
            think = seat.setdefault("movetime_ms", 50)
            if not isinstance(think, int) or isinstance(think, bool) or not 1 <= think <= 60000:
                raise ConfigError(f"{field}.movetime_ms", "must be an integer 1-60000")
        elif kind == "checkpoint":
            _check_checkpoint(env_id, seat, field, params["env_kwargs"])
        seats.append(seat)
    # "human" needs nothing more: its moves come from the client that holds the seat (docs/play.md)
    check_budget_params(params, [seat["llm"] for seat in seats if seat["kind"] == "llm"])
    return seats


CHECKPOINT_ENVS = ("tictactoe_v3", "connect_four_v3")
# RLlib policy layouts a MultiGrid seat can play: shared_value's actors also read every agent's view
CHECKPOINT_POLICIES = ("independent", "shared", "self_play")


def _check_checkpoint(env_id: str, seat: dict[str, Any], field: str, env_kwargs: dict[str, Any]) -> None:
    """A checkpoint trained on this very env: the ray worker's (an RLlib algorithm directory) or,
    on MultiGrid, the xuance worker's (a model file or its folder), as its metadata says."""
    from workers.sdk.rundir import check_trained_on, read_checkpoint_meta

    multigrid = env_family(env_id) == "multigrid"
    if env_id not in CHECKPOINT_ENVS and not multigrid:
        raise ConfigError(field, f"a checkpoint seat plays MultiGrid (RLlib or XuanCe policies) or "
                                 f"{' or '.join(CHECKPOINT_ENVS)} (RLlib); {env_id} has no policy loader here")
    path = seat.get("checkpoint")
    if not isinstance(path, str) or not os.path.isabs(os.path.expanduser(path)):
        raise ConfigError(f"{field}.checkpoint", "must be the absolute path of a checkpoint")
    path = os.path.expanduser(path)
    meta = read_checkpoint_meta(path) or {}
    if meta.get("worker") == "xuance":
        _check_xuance_checkpoint(env_id, meta, path, f"{field}.checkpoint", env_kwargs)
        seat["checkpoint"] = path
        return
    if not os.path.isdir(os.path.join(path, "learner_group", "learner", "rl_module")):
        raise ConfigError(f"{field}.checkpoint", f"{path} is neither an RLlib algorithm checkpoint directory "
                                                 f"nor a XuanCe checkpoint of the xuance worker")
    check_trained_on(meta, env_id, field=f"{field}.checkpoint")
    if multigrid:
        if meta.get("policy") not in CHECKPOINT_POLICIES:
            raise ConfigError(f"{field}.checkpoint", f"has the {meta.get('policy')!r} policy layout; a MultiGrid "
                                                     f"seat plays {', '.join(CHECKPOINT_POLICIES)}")
        if (meta.get("env_kwargs") or {}) != env_kwargs:  # view_size changes what the policy sees
            raise ConfigError(f"{field}.checkpoint", f"was trained with env_kwargs {meta.get('env_kwargs') or {}}, "
                                                     f"this run has {env_kwargs}")
    seat["checkpoint"] = path


def _check_xuance_checkpoint(env_id: str, meta: dict[str, Any], path: str, field: str,
                             env_kwargs: dict[str, Any]) -> None:
    from workers.xuance_worker.catalog import OWN_VIEW_ALGOS

    if meta.get("family") != "multigrid":
        raise ConfigError(field, f"is a XuanCe checkpoint of {meta.get('env')}; a XuanCe seat plays MultiGrid")
    if meta.get("env_id") != env_id:  # a curriculum's checkpoint: the env of its last phase
        raise ConfigError(field, f"was trained on {meta.get('env_id')}, not {env_id}")
    if meta.get("algo") not in OWN_VIEW_ALGOS:
        raise ConfigError(field, f"is a {meta.get('algo')} policy, whose actors read other agents' actions or "
                                 f"messages; a seat sees its own agent: {', '.join(OWN_VIEW_ALGOS)} can play")
    if (meta.get("env_kwargs") or {}) != env_kwargs:
        raise ConfigError(field, f"was trained with env_kwargs {meta.get('env_kwargs') or {}}, this run has "
                                 f"{env_kwargs}")
    if os.path.isdir(path) and not any(name.endswith(".pth") for name in os.listdir(path)):
        raise ConfigError(field, f"{path} holds no XuanCe model (.pth)")
