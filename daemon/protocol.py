"""The socket wire between the daemon and its clients (the app, the CLI, socat).

Newline-delimited JSON in the shape of JSON-RPC 2.0. Both ends import this
module: the method names, error codes, size limit, framing and run states are
defined here once. docs/protocol.md shows every method with an example line.

    request       {"jsonrpc":"2.0","id":1,"method":"list","params":{}}
    result        {"jsonrpc":"2.0","id":1,"result":{...}}
    error         {"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"...","data":{...}}}
    notification  {"jsonrpc":"2.0","method":"events","params":{...}}   (server push)

Standard library only (plus orjson when present for speed on the daemon side).
"""
from __future__ import annotations

import base64
import json
import math
import zlib
from typing import Any

PROTOCOL_VERSION = 1
# the engines' words for a job they hold before it runs (Slurm's pending states, Ray's PENDING), as a
# run's resources.queue carries them: no supervisor runs yet
PENDING_QUEUES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESV_DEL_HOLD"})
MAX_LINE = 1024 * 1024  # bytes; a longer request line is refused with LINE_TOO_LONG

# -- methods -------------------------------------------------------------
HELLO = "hello"
STATUS = "status"
WORKERS = "workers"
SCHEMA = "schema"
SUBMIT = "submit"
LIST = "list"
GET = "get"
CANCEL = "cancel"
PAUSE = "pause"
RESUME = "resume"
STOP = "stop"          # checkpoint at the next safe point and end as "stopped" (daemon/runs.py: stop)
CONTINUE = "continue"  # start a stopped run again as the same run, from its checkpoint
DELETE = "delete"
SUBSCRIBE = "subscribe"
UNSUBSCRIBE = "unsubscribe"
METRICS = "metrics"
HISTORY = "history"            # a run's scalars at a bounded size, then follow its events from the offset
LOGS = "logs"
EVENTS = "read_events"
FRAMES = "frames"
DATASETS = "datasets"
SHUTDOWN = "shutdown"
TAG = "tag"      # add/remove a run's tags (labels the user gives it)
NOTE = "note"    # set a run's note
SWEEP = "sweep"                # submit a sweep spec (daemon/sweeps.py)
SWEEPS = "sweeps"              # list the sweeps
SWEEP_GET = "sweep_get"        # one sweep: trials ranked, their runs, param importances
SWEEP_CANCEL = "sweep_cancel"  # stop a sweep and cancel its runs
SEAT = "seat"    # take or leave a human seat of a run (one client holds a seat; docs/play.md)
ACT = "act"      # the human's action for a seat this client holds (workers/sdk/control.py carries it)
METHODS = frozenset({HELLO, STATUS, WORKERS, SCHEMA, SUBMIT, LIST, GET, CANCEL, PAUSE,
                     RESUME, STOP, CONTINUE, DELETE, SUBSCRIBE, UNSUBSCRIBE, METRICS, HISTORY, LOGS, EVENTS, FRAMES, DATASETS, SHUTDOWN,
                     TAG, NOTE, SWEEP, SWEEPS, SWEEP_GET, SWEEP_CANCEL, SEAT, ACT})

# -- notifications (server -> client) -----------------------------------
NOTIFY_RUN = "run"          # a run record changed (params: {"rev", "run"} or {"rev", "deleted": id})
NOTIFY_EVENTS = "events"    # telemetry lines of one run (params: {"run", "from", "to", "events"})
NOTIFY_SYNCED = "synced"    # the backlog a subscribe asked for has been sent (params: {"rev"})
NOTIFY_FRAME = "frame"      # one relayed FastLane frame (params: see daemon/relay.py)

# -- a run's tags and note ------------------------------------------------
TAG_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._/-]{0,39}"  # no spaces, no ':' (the app's filter says tag:NAME)
MAX_TAGS = 32
MAX_NOTE = 4000  # characters
# where a run can be mirrored (a run config's ``mirror``; daemon/mirror.py, docs/mirrors.md)
MIRROR_TARGETS = ("wandb", "mlflow")

# -- error codes ---------------------------------------------------------
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
LINE_TOO_LONG = -32001
NOT_FOUND = -32002
BAD_STATE = -32003
INVALID_CONFIG = -32004
AMBIGUOUS = -32005

# -- run states ------------------------------------------------------------
QUEUED = "queued"
STARTING = "starting"
RUNNING = "running"
PAUSED = "paused"
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
STOPPED = "stopped"   # ended on a stop, with a checkpoint: "continue" starts it again as the same run
LOST = "lost"
ACTIVE_STATES = frozenset({STARTING, RUNNING, PAUSED})
# ended: no process of the run is left (a stopped run is unfinished all the same: CONTINUABLE)
FINAL_STATES = frozenset({SUCCEEDED, FAILED, CANCELLED, STOPPED, LOST})
CONTINUABLE_STATES = frozenset({STOPPED, FAILED, CANCELLED, LOST})
STATES = (QUEUED, STARTING, RUNNING, PAUSED, SUCCEEDED, FAILED, CANCELLED, STOPPED, LOST)

try:  # orjson is ~5x faster than json for the daemon's hot path
    import orjson as _orjson

    def dumps(obj: Any) -> bytes:
        return _orjson.dumps(obj)

    def loads(data: bytes | str) -> Any:
        return _orjson.loads(data)

    JSONDecodeError: type[Exception] = _orjson.JSONDecodeError

    def raw_json(text: str) -> Any:
        """JSON text kept as it is inside what ``dumps`` writes (a stored run's config and
        summary, sent without being parsed and encoded again). Text from before the store
        wrote strict JSON may hold NaN or Infinity, which only a parse can turn into null."""
        if "NaN" in text or "Infinity" in text:
            return _orjson.loads(_orjson.dumps(json.loads(text)))
        return _orjson.Fragment(text)

    def raw_fragment(data: bytes) -> Any:
        """JSON bytes this process encoded itself, kept as they are inside what ``dumps`` writes."""
        return _orjson.Fragment(data)
except ImportError:  # pragma: no cover - orjson is a hard dependency; kept for socat-style scripts
    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    def loads(data: bytes | str) -> Any:
        return json.loads(data)

    JSONDecodeError = json.JSONDecodeError

    def raw_json(text: str) -> Any:
        return json.loads(text)

    def raw_fragment(data: bytes) -> Any:
        return json.loads(data)


class RPCError(Exception):
    """An error reply: raised by handlers in the daemon, re-raised by clients."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def request(req_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params or {}}) + b"\n"


def result(req_id: Any, value: Any) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": req_id, "result": value}) + b"\n"


def error(req_id: Any, err: RPCError) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": req_id, "error": err.to_json()}) + b"\n"


def notification(method: str, params: dict[str, Any]) -> bytes:
    return dumps({"jsonrpc": "2.0", "method": method, "params": params}) + b"\n"


def events_notification(run_id: str, start: int, end: int, raw_events: list[bytes]) -> bytes:
    """An ``events`` notification built around already-encoded event lines.

    The daemon has validated each line as one JSON object; splicing the bytes in
    spares a decode and re-encode of every metric on the way to each client.
    """
    head = b'{"jsonrpc":"2.0","method":"events","params":{"run":' + dumps(run_id) + \
        b',"from":' + str(start).encode() + b',"to":' + str(end).encode() + b',"events":['
    return head + b",".join(raw_events) + b"]}}\n"


_EVENTS_KEY = b',"events":['


def raw_events_result(head: dict[str, Any], lines: list[bytes]) -> dict[str, Any]:
    """A raw ``read_events`` page: ``head`` (run, from, next, end), how many ``lines``, and
    the lines spliced in as they are, last, so split_raw_events_result can take them back
    as bytes without decoding them."""
    return {**head, "lines": len(lines), "events": raw_fragment(b"[" + b",".join(lines) + b"]")}


def split_raw_events_result(line: bytes, req_id: Any) -> dict[str, Any] | None:
    """The reply line to ``req_id`` of a raw_events_result, decoded but for its events:
    ``events_raw`` holds the comma-joined lines. None when the line is anything else (the
    caller decodes it whole)."""
    head = b'{"jsonrpc":"2.0","id":' + dumps(req_id) + b',"result":{'
    cut = line.find(_EVENTS_KEY)
    if not line.startswith(head) or cut < 0 or not line.endswith(b"]}}"):
        return None
    try:
        page = loads(line[:cut] + b"}}")["result"]
    except (JSONDecodeError, ValueError, KeyError, TypeError):
        return None
    page["events_raw"] = line[cut + len(_EVENTS_KEY):-3]
    return page


def parse_request(line: bytes) -> tuple[Any, str, dict[str, Any]]:
    """Decode one request line; raise RPCError (with the id when known)."""
    try:
        msg = loads(line)
    except (JSONDecodeError, ValueError, RecursionError) as exc:
        raise RPCError(PARSE_ERROR, f"malformed JSON: {exc}") from None
    if not isinstance(msg, dict):
        raise RPCError(INVALID_REQUEST, "a request must be a JSON object")
    req_id = msg.get("id")
    if req_id is not None and (isinstance(req_id, bool) or not isinstance(req_id, (int, str))):
        raise RPCError(INVALID_REQUEST, "'id' must be an integer or a string")
    method = msg.get("method")
    if not isinstance(method, str):
        err = RPCError(INVALID_REQUEST, "'method' must be a string")
        err.data = {"id": req_id}
        raise err
    params = msg.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        err = RPCError(INVALID_PARAMS, "'params' must be an object")
        err.data = {"id": req_id}
        raise err
    return req_id, method, params


# -- what a run record's summary carries ----------------------------------
RETURNS_KEPT = 100      # the last episode returns a run's summary keeps (the return window's limit)


def mean_return(returns: list[Any], window: int) -> float | None:
    """The smoothed return: the mean of the last ``window`` finite episode returns, None before
    the first. The one definition, for both ends: the daemon's brief listing and the app's and
    the CLI's (mosaic_tui.fmt.smoothed_return)."""
    vals = [float(v) for v in returns[-window:]
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


# -- a relayed frame (the `frames` method's notifications) -------------------
FRAME_ENCODING = "rgb8+zlib"


def encode_frame(run_id: str, stream: int, n: int, rgb: Any) -> dict[str, Any]:
    """An HxWx3 uint8 frame as a ``frame`` notification's params: its rows of RGB bytes,
    zlib-compressed (level 1: cheap for the daemon, ~5-20x smaller for rendered envs), base64."""
    height, width, _ = rgb.shape
    return {"run": run_id, "stream": stream, "n": n, "width": width, "height": height, "encoding": FRAME_ENCODING,
            "data": base64.b64encode(zlib.compress(rgb.tobytes(), 1)).decode()}


def decode_frame(params: dict[str, Any]) -> Any:
    """A ``frame`` notification's pixels as an HxWx3 uint8 array (numpy is imported here, by a
    client that shows frames)."""
    import numpy as np
    if params.get("encoding") != FRAME_ENCODING:
        raise ValueError(f"unknown frame encoding {params.get('encoding')!r}")
    raw = zlib.decompress(base64.b64decode(params["data"]))
    return np.frombuffer(raw, dtype=np.uint8).reshape(params["height"], params["width"], 3)


# -- parameter helpers shared by handlers --------------------------------
_MISSING = object()


def param(params: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = _MISSING) -> Any:
    """Fetch a typed parameter or raise INVALID_PARAMS naming it."""
    if name not in params or params[name] is None:
        if default is _MISSING:
            raise RPCError(INVALID_PARAMS, f"missing parameter '{name}'")
        return default
    value = params[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        names = "/".join(k.__name__ for k in kinds)
        raise RPCError(INVALID_PARAMS, f"parameter '{name}' must be {names}, not {type(value).__name__}")
    return value
