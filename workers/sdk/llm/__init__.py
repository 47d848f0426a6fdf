"""The LLM layer every LLM worker shares (balrog, mosaic_llm): one client, one parser, one
observation-to-text module per env family.

    from workers.sdk.llm.client import make_client
    client = make_client({"backend": "local"})            # Gemma 3 270M through llama.cpp, in-process
    reply = client.complete(messages, choices=["turn left", "turn right", "go forward"])
    reply.action, reply.valid, reply.tokens_in, reply.latency_s

| module | what |
|---|---|
| ``client`` | ``make_client(spec)`` -> ``LLMClient.complete`` -> ``Reply``: local llama.cpp, OpenAI-compatible, Anthropic; retries, backoff, cost |
| ``keys`` | API keys from an environment variable or a 0600 file under the mosaic home, never from config |
| ``parse`` | BALROG's action extraction for unconstrained replies, and the invalid-action count |
| ``history`` | BALROG's ``HistoryPromptBuilder`` (observations and actions as messages) |
| ``stream`` | the ``llm_step`` events of one call, partial ones coalesced while the reply streams |
| ``babyai``, ``crafter``, ``textworld``, ``nethack`` | observation to text, per env family |

Nothing here imports llama_cpp, openai or anthropic at module level: the
descriptors import ``client`` for the spec's names only. docs/workers/llm.md
is the guide.
"""
