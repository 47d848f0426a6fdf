"""The local model served once for several runs (``served: shared`` in an LLM spec).

Four runs of the local backend load four copies of the model; with ``served: shared`` they share
one llama.cpp server instead. The daemon (daemon/model_server.py) starts one server per key
(model file, context size, threads) before a run that asks for it, records it in
``<home>/model_servers/<key>.json`` (pid, port, key, the runs using it), and stops it once no live
run uses it. The run's client (``SharedLocalClient`` in workers/sdk/llm/client.py) finds the
server through that record.

The server is llama-cpp-python's own OpenAI-compatible server, started through this module's
``main`` so that its model has the in-process model's settings: ``swa_full`` (Gemma 3 keeps the
prompt prefix) and ``--interrupt_requests False`` (a request arriving while another streams does
not cut it). Nothing here imports llama_cpp at module level: the daemon imports this module.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any

from workers.sdk.llm.spec import DEFAULTS, SPEC_PARAMS

SERVERS_DIR = "model_servers"
MODEL_ALIAS = "local"
SERVED = ("worker", "shared")


def server_key(model: str | None, n_ctx: int, n_threads: int | None) -> str:
    """One server per (model file, context size, threads): the record's name. ``model`` None is
    the default Gemma GGUF, resolved by the server itself (the daemon never assembles it)."""
    model_id = os.path.realpath(os.path.expanduser(model)) if model else "default"
    digest = hashlib.sha1(f"{model_id}|{n_ctx}|{n_threads or 0}".encode()).hexdigest()[:12]
    return f"{os.path.basename(model_id).removesuffix('.gguf')}-{n_ctx}-{digest}"


def shared_specs(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The LLM specs among a run's params that ask for a shared local server: the run's own
    (BALROG, and a MOSAIC LLM run's default) and each seat's (``seats[i].llm`` over the default)."""
    default = {key: params[key] for key in SPEC_PARAMS if key in params}
    specs = [default]
    for seat in params.get("seats") or []:
        if isinstance(seat, dict) and isinstance(seat.get("llm"), dict):
            specs.append({**default, **seat["llm"]})
    return [s for s in specs if s.get("backend", "local") == "local" and s.get("served") == "shared"]


def servers_for(params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """key -> what its server loads (model, n_ctx, n_threads), for every shared spec of a run."""
    out = {}
    for spec in shared_specs(params):
        model, n_ctx, n_threads = spec.get("model"), spec.get("n_ctx", DEFAULTS["n_ctx"]), spec.get("n_threads")
        out[server_key(model, n_ctx, n_threads)] = {"model": model, "n_ctx": n_ctx, "n_threads": n_threads}
    return out


def server_command(python: str, model: str | None, n_ctx: int, n_threads: int | None, port: int) -> list[str]:
    """The command line of one shared server (this module's main on a port)."""
    return [python, "-m", "workers.sdk.llm.served", "--model", model or "", "--n_ctx", str(n_ctx),
            "--n_threads", str(n_threads or 0), "--port", str(port)]


def record_path(home: str, key: str) -> str:
    """The path of a shared server's record under the home."""
    return os.path.join(home, SERVERS_DIR, f"{key}.json")


def read_record(home: str, key: str) -> dict[str, Any] | None:
    """A server's record, or None when there is none (or it is unreadable: half-written by a crash)."""
    try:
        with open(record_path(home, key)) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def main(argv: list[str] | None = None) -> None:
    """Run llama_cpp.server on the model with the in-process model's settings."""
    import argparse

    parser = argparse.ArgumentParser(description="a local GGUF model served once for several runs")
    parser.add_argument("--model", default="")
    parser.add_argument("--n_ctx", type=int, required=True)
    parser.add_argument("--n_threads", type=int, default=0)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)

    import llama_cpp

    from workers.sdk.llm.spec import default_model_path

    base = llama_cpp.Llama

    class SwaFullLlama(base):
        # the server's settings have no swa_full; llama_cpp.server builds its model through this name
        def __init__(self, *a, **kw):
            kw.setdefault("swa_full", True)
            super().__init__(*a, **kw)

    llama_cpp.Llama = SwaFullLlama
    threads = str(args.n_threads or os.cpu_count() or 1)
    sys.argv = ["llama_cpp.server", "--model", args.model or default_model_path(), "--model_alias", MODEL_ALIAS,
                "--host", "127.0.0.1", "--port", str(args.port), "--n_ctx", str(args.n_ctx),
                "--n_threads", threads, "--n_threads_batch", threads, "--interrupt_requests", "False",
                "--seed", "0"]
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
