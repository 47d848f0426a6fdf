"""A small OpenAI-compatible HTTP server that misbehaves on purpose (the fault tests' endpoint).

``FaultServer(script)`` answers ``POST /v1/chat/completions`` with a streamed
reply (``text``) and ``POST /v1/messages`` with an Anthropic Messages stream, after the faults queued in ``script`` have been served, one
per request: ``"429"`` (rate limited, Retry-After ``retry_after``, 0 by default), ``"500"``, ``"slow"``
(sleeps ``slow_s`` before answering), ``"404"`` (no such model: not worth a retry), ``"garbage"`` (200 with an HTML page),
``"hang_up"`` (closes the connection without a word). It records each
request's headers, body and arrival (``at``, time.monotonic()), so a test can see which key was
sent and when.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.plugins.base import free_port


class FaultServer:
    def __init__(self, script: list[str] | None = None, text: str = "go forward", slow_s: float = 3.0,
                 usage: tuple[int, int] = (12, 2), retry_after: str = "0"):
        self.script = list(script or [])
        self.retry_after = retry_after
        self.text = text
        self.slow_s = slow_s
        self.usage = usage
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                body = json.dumps({"object": "list", "data": [{"id": "fault-model", "object": "model"}]}).encode()
                self._send(200, body, "application/json")

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with outer.lock:
                    fault = outer.script.pop(0) if outer.script else None
                    outer.requests.append({"headers": {k.lower(): v for k, v in self.headers.items()}, "body": body,
                                           "at": time.monotonic(), "fault": fault})
                if fault == "429":
                    return self._send(429, b'{"error": {"message": "rate limited"}}', "application/json",
                                      {"retry-after": outer.retry_after})
                if fault == "404":
                    return self._send(404, b'{"error": {"message": "no such model"}}', "application/json")
                if fault == "500":
                    return self._send(500, b'{"error": {"message": "boom"}}', "application/json")
                if fault == "garbage":
                    return self._send(200, b"<html><body>502 Bad Gateway, or so</body></html>", "text/html")
                if fault == "hang_up":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if fault == "slow":
                    time.sleep(outer.slow_s)
                if self.path.endswith("/messages"):
                    return self._stream_anthropic(outer.text)
                self._stream(outer.text)

            def _send(self, status, body, kind, headers=None):
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

            def _stream(self, text):
                def chunk(delta=None, usage=None):
                    event = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fault-model",
                             "choices": [] if delta is None else
                             [{"index": 0, "delta": delta, "finish_reason": None}]}
                    if usage is not None:
                        event["usage"] = usage
                    return b"data: " + json.dumps(event).encode() + b"\n\n"

                words = text.split(" ")
                parts = [chunk({"role": "assistant", "content": ""})]
                parts += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)]
                parts.append(chunk(usage={"prompt_tokens": outer.usage[0], "completion_tokens": outer.usage[1],
                                          "total_tokens": sum(outer.usage)}))
                parts.append(b"data: [DONE]\n\n")
                body = b"".join(parts)
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def _stream_anthropic(self, text):
                """The Messages API's event stream (what the anthropic SDK reads)."""
                def event(kind, data):
                    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

                usage_in, usage_out = outer.usage
                parts = [event("message_start", {"message": {
                    "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "fault-model",
                    "stop_reason": None, "stop_sequence": None,
                    "usage": {"input_tokens": usage_in, "output_tokens": 1}}}),
                    event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})]
                for i, word in enumerate(text.split(" ")):
                    parts.append(event("content_block_delta", {"index": 0, "delta": {
                        "type": "text_delta", "text": word if i == 0 else " " + word}}))
                parts += [event("content_block_stop", {"index": 0}),
                          event("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                                  "usage": {"output_tokens": usage_out}}),
                          event("message_stop", {})]
                body = b"".join(parts)
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "FaultServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def free_port_url() -> str:
    """A URL where nothing listens (the endpoint is down)."""
    return f"http://127.0.0.1:{free_port()}/v1"


if __name__ == "__main__":  # serve a fault script by hand: python -m tests.plugins.llm_fault_server 429 garbage
    import sys

    with FaultServer(sys.argv[1:]) as server:
        print(server.base_url, flush=True)
        threading.Event().wait()
