"""daemon/protocol.py: request parsing, typed params, spliced event notifications, the smoothed return."""
from __future__ import annotations

import math

import orjson
import pytest

from daemon import protocol as P


@pytest.mark.parametrize("line, code, says", [
    (b"{not json", P.PARSE_ERROR, "malformed JSON"),
    (b"[1, 2]", P.INVALID_REQUEST, "JSON object"),
    (b'{"id": true, "method": "status"}', P.INVALID_REQUEST, "'id'"),
    (b'{"id": 1.5, "method": "status"}', P.INVALID_REQUEST, "'id'"),
    (b'{"id": 3, "method": 7}', P.INVALID_REQUEST, "'method'"),
    (b'{"id": 4, "method": "get", "params": [1]}', P.INVALID_PARAMS, "'params'"),
])
def test_a_bad_request_is_an_error_with_its_code(line, code, says):
    with pytest.raises(P.RPCError) as exc:
        P.parse_request(line)
    assert exc.value.code == code and says in exc.value.message


def test_a_good_request_and_the_id_kept_for_the_error_reply():
    assert P.parse_request(b'{"jsonrpc":"2.0","id":"a","method":"get","params":null}') == ("a", "get", {})
    assert P.parse_request(P.request(7, "list", {"state": "running"})) == (7, "list", {"state": "running"})
    with pytest.raises(P.RPCError) as exc:
        P.parse_request(b'{"id": 9, "method": null}')
    assert exc.value.data == {"id": 9}


def test_a_param_is_fetched_typed_or_named_in_the_error():
    assert P.param({"n": 3}, "n", int) == 3
    assert P.param({"n": None}, "n", int, 5) == 5
    assert P.param({}, "x", (int, float), 0.5) == 0.5
    with pytest.raises(P.RPCError, match="missing parameter 'n'"):
        P.param({}, "n", int)
    with pytest.raises(P.RPCError, match="parameter 'n' must be int, not bool"):
        P.param({"n": True}, "n", int)
    assert P.param({"f": False}, "f", bool) is False
    with pytest.raises(P.RPCError, match="must be int/float, not str"):
        P.param({"x": "1"}, "x", (int, float))


def test_an_events_notification_splices_the_lines_as_they_are():
    lines = [b'{"v":1,"type":"scalar","t":1,"tag":"a","value":1,"step":1}', b'{"v":1,"type":"heartbeat","t":2}']
    note = P.events_notification("r1", 10, 120, lines)
    assert note.endswith(b"\n")
    msg = orjson.loads(note)
    assert msg["method"] == "events"
    assert msg["params"] == {"run": "r1", "from": 10, "to": 120, "events": [orjson.loads(x) for x in lines]}


def test_a_raw_page_comes_back_as_its_head_and_its_lines_as_bytes():
    lines = [b'{"v":1,"type":"heartbeat","t":1}', b'{"v":1,"type":"heartbeat","t":2}']
    reply = P.result(5, P.raw_events_result({"run": "r", "from": 0, "next": 66, "end": 66}, lines))
    page = P.split_raw_events_result(reply.rstrip(b"\n"), 5)
    assert page == {"run": "r", "from": 0, "next": 66, "end": 66, "lines": 2, "events_raw": b",".join(lines)}
    assert P.split_raw_events_result(reply.rstrip(b"\n"), 6) is None             # another request's reply
    assert P.split_raw_events_result(P.result(5, {"x": 1}).rstrip(b"\n"), 5) is None


def test_the_smoothed_return_is_the_mean_of_the_last_finite_returns():
    assert P.mean_return([1.0, 2.0, 3.0, 4.0], 2) == 3.5
    assert P.mean_return([5.0, "nan", math.inf, None, True, 1.0], 6) == 3.0
    assert P.mean_return([1.0, "nan"], 1) is None
    assert P.mean_return([], 20) is None
