"""llama-cpp-python's own OpenAI-compatible server on the local Gemma 3 270M: a real server for the
tests and the bench of LLM episodes in parallel.

``LlamaServer()`` starts ``python -m llama_cpp.server`` on a free port, waits
until it answers ``GET /v1/models``, and ends it on exit. ``interrupt_requests``
is off: by default the server cuts the reply streaming when another request
comes in, and episodes in flight send requests while others stream. The server
answers one request at a time (one llama.cpp context); requests in flight queue.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

MODEL_ALIAS = "gemma-3-270m"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, n_ctx: int = 2048, n_threads: int = 2, start_timeout_s: float = 120.0):
        from workers.sdk.llm.client import default_model_path

        self.port = free_port()
        self.command = [sys.executable, "-m", "llama_cpp.server", "--model", default_model_path(),
                        "--model_alias", MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(self.port),
                        "--n_ctx", str(n_ctx), "--n_threads", str(n_threads), "--n_threads_batch", str(n_threads),
                        "--interrupt_requests", "False", "--seed", "0"]
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.log = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "LlamaServer":
        import tempfile

        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.command, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {self.proc.returncode}:\n{self.output()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as reply:
                    if reply.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"llama_cpp.server did not answer in {self.start_timeout_s:.0f} s")
            time.sleep(0.3)

    def output(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.log is not None:
            self.log.close()
            self.log = None
