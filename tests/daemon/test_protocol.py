"""The socket protocol: every method, and every kind of bad request."""
from __future__ import annotations

import json
import socket
import time

import pytest

from daemon import protocol as P
from tests.helpers import connect, wait_state


class Raw:
    """A raw socket speaking lines, like socat would."""

    def __init__(self, home):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(10)
        self.sock.connect(str(home.socket_path))
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> dict:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def reply(self, data: bytes) -> dict:
        self.send(data)
        while True:
            msg = self.line()
            if "id" in msg:
                return msg


def test_hello_and_status(daemon):
    with connect(daemon) as c:
        assert c.info["protocol"] == P.PROTOCOL_VERSION
        assert c.info["home"] == str(daemon.root)
        assert c.info["epoch"]
        status = c.call(P.STATUS)
        assert status["pid"] == c.info["pid"]
        assert status["clients"] >= 1
        with pytest.raises(P.RPCError) as err:
            c.call(P.HELLO, protocol=999)
        assert "not supported" in err.value.message


def test_every_method_round_trip(daemon):
    with connect(daemon) as c:
        workers = c.call(P.WORKERS)
        assert "synthetic" in {w["name"] for w in workers}
        schema = c.call(P.SCHEMA, worker="synthetic", algo="emit")
        assert schema["properties"]["rate"]["type"] == "number"
        run = c.call(P.SUBMIT, config={"worker": "synthetic", "algo": "emit", "env": "none", "steps": 200000,
                                       "params": {"rate": 2000}})
        assert run["state"] in (P.QUEUED, P.STARTING)
        assert c.call(P.GET, run=run["id"])["id"] == run["id"]
        assert c.call(P.GET, run=run["name"])["id"] == run["id"]
        assert c.call(P.GET, run=run["id"][:12].lower())["id"] == run["id"]  # prefix, any case
        listed = c.call(P.LIST)
        assert listed["rev"] >= run["rev"] and [r["id"] for r in listed["runs"]] == [run["id"]]
        wait_state(daemon, run["id"], P.RUNNING)
        assert c.call(P.PAUSE, run=run["id"])["state"] == P.PAUSED
        assert c.call(P.RESUME, run=run["id"])["state"] == P.RUNNING
        sub = c.call(P.SUBSCRIBE, runs=True, events=[run["id"]])
        assert sub["cursors"][run["id"]] == 0
        time.sleep(0.5)
        assert c.call(P.UNSUBSCRIBE) == {"ok": True}
        events = c.call(P.EVENTS, run=run["id"], types=["run_started"])
        assert events["events"][0]["type"] == "run_started"
        metrics = c.call(P.METRICS, run=run["id"], tags=["synthetic/value_1"])
        assert metrics["points"]["synthetic/value_1"]
        logs = c.call(P.LOGS, run=run["id"], stream="supervisor")
        assert logs["size"] == len(logs["data"].encode())
        cancelled = c.call(P.CANCEL, run=run["id"])
        assert cancelled["cancel_requested"]
        wait_state(daemon, run["id"], P.CANCELLED)
        with pytest.raises(P.RPCError) as err:
            c.call(P.CANCEL, run=run["id"])
        assert err.value.code == P.BAD_STATE
        assert c.call(P.DELETE, run=run["id"])["deleted"] == run["id"]
        with pytest.raises(P.RPCError) as err:
            c.call(P.GET, run=run["id"])
        assert err.value.code == P.NOT_FOUND
        assert c.call(P.SHUTDOWN)["stopping"] is True


def test_bad_requests_get_errors_and_the_daemon_stays_up(daemon):
    raw = Raw(daemon)
    assert raw.reply(b"this is not json\n")["error"]["code"] == P.PARSE_ERROR
    assert raw.reply(b"[1,2,3]\n")["error"]["code"] == P.INVALID_REQUEST
    assert raw.reply(b'{"id":1}\n')["error"]["code"] == P.INVALID_REQUEST
    assert raw.reply(b'{"id":2,"method":"launch_missiles"}\n')["error"]["code"] == P.METHOD_NOT_FOUND
    assert raw.reply(b'{"id":3,"method":"get","params":{"run":5}}\n')["error"]["code"] == P.INVALID_PARAMS
    assert raw.reply(b'{"id":4,"method":"get","params":[1]}\n')["error"]["code"] == P.INVALID_PARAMS
    assert raw.reply(b'{"id":5,"method":"get","params":{}}\n')["error"]["message"] == "missing parameter 'run'"
    assert raw.reply(b'{"id":6,"method":"submit","params":{"config":"x"}}\n')["error"]["code"] == P.INVALID_PARAMS
    reply = raw.reply(b'{"id":7,"method":"submit","params":{"config":{"worker":"synthetic","algo":"emit",'
                      b'"env":"none","steps":"many"}}}\n')
    assert reply["error"]["code"] == P.INVALID_CONFIG and reply["error"]["data"]["field"] == "steps"
    deep = b"[" * 100000 + b"]" * 100000
    assert raw.reply(deep + b"\n")["error"]["code"] in (P.PARSE_ERROR, P.INVALID_REQUEST, P.LINE_TOO_LONG)
    # an oversized line: refused, and the same connection keeps working
    big = b'{"id":8,"method":"status","params":{"pad":"' + b"x" * (P.MAX_LINE + 10) + b'"}}\n'
    assert raw.reply(big)["error"]["code"] == P.LINE_TOO_LONG
    assert raw.reply(b'{"id":9,"method":"status"}\n')["id"] == 9
    # the socket works for others too
    with connect(daemon) as c:
        assert c.call(P.STATUS)["pid"]


def test_a_bad_client_does_not_disturb_others(daemon):
    with connect(daemon, "good") as good:
        run = good.call(P.SUBMIT, config={"worker": "synthetic", "algo": "emit", "env": "none", "steps": 3000,
                                          "params": {"rate": 3000}})
        good.call(P.SUBSCRIBE, events=[run["id"]])
        half = socket.socket(socket.AF_UNIX)
        half.connect(str(daemon.socket_path))
        half.sendall(b'{"id":1,"method":"sta')  # half a request, then half-close
        half.shutdown(socket.SHUT_WR)
        for _ in range(200):
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(daemon.socket_path))
            s.sendall(b"\xff\xfe garbage\n")
            s.close()
        half.close()
        steps = set()
        deadline = time.monotonic() + 30
        while len(steps) < 3000 and time.monotonic() < deadline:
            for method, params in good.notifications(timeout=1):
                if method == P.NOTIFY_EVENTS:
                    steps.update(e["step"] for e in params["events"] if e["type"] == "scalar")
                if len(steps) >= 3000:
                    break
        assert steps == set(range(1, 3001))
        assert good.call(P.STATUS)["clients"] >= 1


def test_notifications_are_shaped_for_socat(daemon):
    """Every server line is one JSON object with jsonrpc 2.0 framing."""
    raw = Raw(daemon)
    raw.send(b'{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"runs":true,"events":"*"}}\n')
    assert raw.line()["result"]["rev"] >= 0
    with connect(daemon) as c:
        c.call(P.SUBMIT, config={"worker": "synthetic", "algo": "emit", "env": "none", "steps": 10})
    seen = set()
    deadline = time.monotonic() + 20
    while {"run", "events"} - seen and time.monotonic() < deadline:
        msg = raw.line()
        assert msg["jsonrpc"] == "2.0" and "id" not in msg
        seen.add(msg["method"])
        if msg["method"] == "events":
            assert msg["params"]["to"] > msg["params"]["from"]
    assert {"run", "events"} <= seen


def test_a_raw_events_page_splits_back_into_its_head_and_its_lines_as_bytes():
    """raw_events_result (the daemon's read_events with raw) and split_raw_events_result (the
    CLI's CSV) are the two ends of one reply: the lines come back byte for byte, undecoded."""
    from daemon import protocol as P
    lines = [b'{"v":1,"type":"scalar","t":1.5,"tag":"a,\\"b","value":"nan","step":1}',
             b'{"v":1,"type":"episode","t":2.0,"step":2,"return":1.0,"length":3}']
    reply = P.result(7, P.raw_events_result({"run": "R", "from": 0, "next": 99, "end": 120}, lines))[:-1]
    page = P.split_raw_events_result(reply, 7)
    assert page == {"run": "R", "from": 0, "next": 99, "end": 120, "lines": 2, "events_raw": b",".join(lines)}
    assert P.loads(reply)["result"]["events"] == [P.loads(line) for line in lines]
    assert P.split_raw_events_result(reply, 8) is None                     # another request's answer
    assert P.split_raw_events_result(P.error(7, P.RPCError(P.NOT_FOUND, "no run"))[:-1], 7) is None


def test_the_app_reaches_no_daemon_internals():
    """What mosaic_tui needs of the daemon's side is on the shared wire modules both ends import
    (daemon.protocol, daemon.home, and daemon.version, which each end says in hello and compares);
    starting a daemon in the foreground is the daemon's own main."""
    import ast
    from pathlib import Path
    # daemon.search_space: the pure definition of a sweep's Optuna distributions, which the daemon
    # asks trials with and `mosaic explain` rebuilds the study with (it imports nothing of the daemon)
    allowed = {"daemon", "daemon.protocol", "daemon.home", "daemon.version", "daemon.__main__",
               "daemon.search_space"}
    reached = []
    for path in sorted((Path(__file__).resolve().parents[2] / "mosaic_tui").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            reached += [f"{path.name}: {n}" for n in names if n.startswith("daemon") and n not in allowed]
            if isinstance(node, ast.ImportFrom) and node.module == "daemon":
                reached += [f"{path.name}: daemon.{a.name}" for a in node.names
                            if f"daemon.{a.name}" not in allowed]
    assert reached == []
