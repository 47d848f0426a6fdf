"""The shared LLM layer (workers/sdk/llm): the real local model, a misbehaving endpoint, keys, parsing."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tests.plugins.llm_fault_server import FaultServer, free_port_url
from workers.sdk import telemetry as tm
from workers.sdk.llm import keys
from workers.sdk.llm.client import SpecError, make_client, normalise_spec
from workers.sdk.llm.parse import ROBUST_FAILED, extract, match_choice

KEY = "sk-planted-0123456789abcdef"
CHOICES = ["turn left", "turn right", "go forward"]


def fast(base_url, **more):
    """An openai-backend spec with tiny waits: retries are counted, not timed."""
    return {"backend": "openai", "base_url": base_url, "model": "fault-model", "backoff_s": 0.01,
            "timeout_s": 1.0, "api_key_env": "MOSAIC_TEST_KEY", **more}


@pytest.fixture
def planted_key(monkeypatch):
    monkeypatch.setenv("MOSAIC_TEST_KEY", KEY)
    return KEY


LOCAL_MODEL = """
import json
from dataclasses import asdict
from workers.sdk.llm.client import make_client
CHOICES = ["turn left", "turn right", "go forward"]
client = make_client()  # no configuration: the local Gemma model
seen = []
reply = client.complete("You are in a grid world. Legal actions: turn left, turn right, go forward.\\n"
                        "The goal is straight ahead.\\nAction:", choices=CHOICES, on_text=seen.append)
free = client.complete([{"role": "user", "content": "Name a colour."}], max_tokens=8)
print(json.dumps({"reply": asdict(reply), "seen": seen, "free": asdict(free)}, default=str))
"""


def test_local_model_with_grammar_answers_a_legal_action_and_streams():
    # in a child process, as a worker holds it: a native crash in llama.cpp fails this test alone,
    # never the pytest process (and with it the rest of its share of the suite)
    proc = subprocess.run([sys.executable, "-c", LOCAL_MODEL], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    assert proc.returncode == 0, f"the local model's process exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    reply, seen, free = out["reply"], out["seen"], out["free"]
    assert reply["error"] is None
    assert reply["action"] in CHOICES and reply["valid"] and reply["text"] == reply["action"]
    assert reply["tokens_in"] > 10 and reply["tokens_out"] >= 1 and reply["latency_s"] > 0
    assert seen and seen[-1].strip() == reply["text"]
    assert free["error"] is None and free["valid"] and free["action"] is None and 1 <= free["tokens_out"] <= 8


def test_rate_limit_and_server_errors_are_retried_then_succeed(planted_key):
    with FaultServer(["429", "500", "429"]) as server:
        reply = make_client(fast(server.base_url, retries=3)).complete("act", choices=CHOICES)
    assert reply.error is None and reply.action == "go forward" and reply.valid
    assert reply.attempts == 4 and len(server.requests) == 4
    assert (reply.tokens_in, reply.tokens_out) == (12, 2)
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"  # the key went where it belongs


@pytest.mark.parametrize("fault", ["429", "garbage", "hang_up"])
def test_a_fault_that_persists_ends_in_reply_error_after_bounded_retries(planted_key, fault):
    with FaultServer([fault] * 10) as server:
        reply = make_client(fast(server.base_url, retries=2)).complete("act", choices=CHOICES)
    assert reply.error and not reply.valid and reply.action is None
    assert reply.attempts == 3 and len(server.requests) == 3
    expected = {"429": "rate limited", "garbage": "malformed", "hang_up": "down"}[fault]
    assert expected in reply.error
    assert KEY not in reply.error


def test_endpoint_down_and_too_slow(planted_key):
    down = make_client(fast(free_port_url(), retries=1)).complete("act")
    assert down.attempts == 2 and "down or too slow" in down.error
    with FaultServer(["slow", "slow"], slow_s=2.0) as server:
        slow = make_client(fast(server.base_url, retries=1, timeout_s=0.3)).complete("act")
    assert slow.attempts == 2 and "too slow" in slow.error
    with FaultServer(["slow"], slow_s=0.5) as server:  # slow once, then in time
        late = make_client(fast(server.base_url, retries=1, timeout_s=0.3)).complete("act", choices=CHOICES)
    assert late.error is None and late.action == "go forward" and late.attempts == 2


def test_a_refused_request_is_not_retried(planted_key):
    with FaultServer(["404"]) as server:
        reply = make_client(fast(server.base_url, retries=3)).complete("act")
    assert reply.error and "no such model" in reply.error
    assert reply.attempts == 1 and len(server.requests) == 1  # 404: no retry can cure it


def test_cost_from_configured_prices(planted_key):
    with FaultServer(usage=(1000, 500)) as server:
        reply = make_client(fast(server.base_url, price_in=2.0, price_out=10.0)).complete("act")
    assert reply.cost == pytest.approx((1000 * 2.0 + 500 * 10.0) / 1e6)
    with FaultServer() as server:
        assert make_client(fast(server.base_url)).complete("act").cost is None


def test_keys_come_from_env_or_a_private_file_never_from_the_spec(tmp_path, monkeypatch):
    monkeypatch.delenv("MOSAIC_TEST_KEY", raising=False)
    monkeypatch.setenv("MOSAIC_HOME", str(tmp_path))
    assert keys.read_key("MOSAIC_TEST_KEY") is None
    path = keys.write_key("MOSAIC_TEST_KEY", KEY)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert keys.read_key("MOSAIC_TEST_KEY") == KEY
    os.chmod(path, 0o644)
    with pytest.raises(keys.KeyRefused, match="chmod 600"):
        keys.read_key("MOSAIC_TEST_KEY")
    monkeypatch.setenv("MOSAIC_TEST_KEY", "from-env")
    assert keys.read_key("MOSAIC_TEST_KEY") == "from-env"
    with pytest.raises(SpecError) as refused:
        normalise_spec({"backend": "openai", "api_key": KEY})
    assert refused.value.field == "api_key" and KEY not in str(refused.value)
    with pytest.raises(SpecError, match="NAME of an environment variable"):
        normalise_spec({"backend": "openai", "api_key_env": KEY.replace("-", " ")})
    with pytest.raises(SpecError, match="no key"):
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        make_client({"backend": "openai", "api_key_env": "OPENAI_API_KEY"})


def test_balrog_extraction_and_choice_matching():
    assert extract("Go forward!!", "naive") == "Go forward"
    assert extract("The key is ahead.\nACTION: pick up", "cot") == "pick up"
    assert extract("think... <|ACTION|> toggle <|END|> done", "robust") == "toggle"
    assert extract("no tags here", "robust", fallback_whole=False) == ROBUST_FAILED
    assert extract("no tags here", "robust") == "no tags here"
    assert match_choice("go forward", CHOICES) == "go forward"
    assert match_choice(" Go  Forward. ", CHOICES) == "go forward"
    assert match_choice("turn left to face the door", CHOICES) == "turn left"
    assert match_choice("I could turn left or go forward", CHOICES) is None
    assert match_choice("go forwards", CHOICES) is None
    assert match_choice(ROBUST_FAILED, CHOICES) is None


def test_llm_step_event_on_the_wire():
    event = tm.make_event(tm.LLM_STEP, step=3, agent="0", reply="go forward", action="go forward", valid=True,
                          tokens_in=10, tokens_out=2, latency_s=0.3, error=None, partial=False)
    assert tm.check_event(event)["valid"] is True
    with pytest.raises(tm.EventError, match="valid"):
        tm.check_event({**event, "valid": "yes"})
    with pytest.raises(tm.EventError, match="tokens_in"):
        tm.check_event({**event, "tokens_in": True})  # a bool is no count


def test_ingest_counts_final_llm_steps_only(tmp_path):
    """The run summary's llm counts: calls, invalid actions, failed calls, tokens, cost; partials skipped."""
    from daemon.ingest import RunTail

    r, w = os.pipe()
    emitter = tm.Emitter(w, flush_interval=60)
    emitter.llm_step(step=0, agent="0", reply="go", partial=True)
    emitter.llm_step(step=0, agent="0", reply="go forward", action="go forward", valid=True, tokens_in=100,
                     tokens_out=3, latency_s=0.2, cost=0.001, error=None)
    emitter.llm_step(step=1, agent="0", reply="dance", action=None, valid=False, tokens_in=120, tokens_out=2,
                     latency_s=0.2, cost=0.002, error=None)
    emitter.llm_step(step=2, agent="0", reply="", action=None, valid=False, latency_s=3.0,
                     error="HTTP 429: rate limited")
    emitter.close()
    path = tmp_path / "events.jsonl"
    path.write_bytes(os.read(r, 1 << 20))
    os.close(r)
    os.close(w)
    tail = RunTail("r", str(path))
    tail.read_new()
    summary = tail.summary()
    assert summary["llm"] == {"calls": 3, "invalid": 2, "errors": 1, "tokens_in": 220, "tokens_out": 5,
                              "cost": 0.003}
    assert summary["lines"] == 4 and summary["invalid"] == 0 and summary["steps"] == 2
    assert RunTail("r", str(path), summary=summary).summary()["llm"] == summary["llm"]  # kept across restarts


def test_history_prompt_builder_as_balrog_builds_it():
    from workers.sdk.llm.history import HistoryPromptBuilder

    builder = HistoryPromptBuilder(max_text_history=2, system_prompt="RULES", max_cot_history=1)
    for i in range(3):
        builder.update_observation({"long_term_context": f"obs {i}", "short_term_context": f"msg {i}"})
        builder.update_reasoning(f"plan {i}")
        builder.update_action(f"act {i}")
    builder.update_observation({"long_term_context": "obs 3", "short_term_context": "msg 3"})
    messages = builder.get_prompt()
    # upstream keeps 2 x max_text_history events: the oldest go, so the history may begin with an action
    assert messages == [
        {"role": "user", "content": "RULES"},
        {"role": "assistant", "content": "act 1"},                        # its plan is not the last: bare
        {"role": "user", "content": "Observation:\nobs 2"},
        {"role": "assistant", "content": "Previous plan:\nplan 2"},
        {"role": "user", "content": "Current Observation:\nmsg 3\nobs 3"},
    ]
    builder.max_text_history = 1
    assert builder.get_prompt()[2] == {"role": "user", "content": "Observation:"}  # beyond the text history


def test_anthropic_backend_streams_retries_and_sends_the_key(planted_key):
    seen = []
    with FaultServer(["429", "500"], text="<|ACTION|>turn left<|END|>", usage=(40, 7)) as server:
        client = make_client({"backend": "anthropic", "base_url": server.base_url.removesuffix("/v1"),
                              "model": "fault-model", "api_key_env": "MOSAIC_TEST_KEY", "backoff_s": 0.01,
                              "retries": 2})
        reply = client.complete([{"role": "system", "content": "rules"}, {"role": "assistant", "content": "hi"},
                                 {"role": "user", "content": "act"}], choices=CHOICES, on_text=seen.append)
    assert reply.error is None and reply.attempts == 3
    assert reply.text == "<|ACTION|>turn left<|END|>" and seen[-1] == reply.text and len(seen) >= 2
    assert reply.action is None and not reply.valid      # no constrained decoding: the agent parses the tags
    assert extract(reply.text, "robust") == "turn left"
    assert (reply.tokens_in, reply.tokens_out) == (40, 7)
    body = server.requests[-1]["body"]
    assert body["system"] == "rules" and [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    headers = server.requests[-1]["headers"]
    assert KEY in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))


def test_openai_compatible_constraints_go_in_the_request(planted_key):
    with FaultServer(text='{"action": "turn right"}') as server:
        reply = make_client(fast(server.base_url, constrain="json_schema")).complete("act", choices=CHOICES)
        schema = server.requests[-1]["body"]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["action"]["enum"] == CHOICES and reply.action == "turn right" and reply.valid
    with FaultServer() as server:
        make_client(fast(server.base_url, constrain="guided_choice")).complete("act", choices=CHOICES)
        make_client(fast(server.base_url, constrain="grammar")).complete("act", choices=CHOICES)
        make_client(fast(server.base_url)).complete("act", choices=CHOICES)  # auto: none elsewhere than OpenAI
    guided, grammar, auto = (r["body"] for r in server.requests)
    assert guided["guided_choice"] == CHOICES and guided["structured_outputs"] == {"choice": CHOICES}
    assert grammar["grammar"] == 'root ::= "turn left" | "turn right" | "go forward"\n'
    assert not {"guided_choice", "grammar", "response_format"} & set(auto)


PREFIX_EPISODE = """
import json
from workers.sdk.llm.client import make_client
from workers.sdk.llm.history import HistoryPromptBuilder
CHOICES = ["turn left", "turn right", "go forward"]
client = make_client({"n_threads": 2})
builder = HistoryPromptBuilder(max_text_history=4, keep_prefix=True)
builder.update_instruction_prompt("You are an agent in a grid world. Legal actions: turn left, turn right, "
                                  "go forward. Reach the red ball.")
calls = []
for step in range(13):
    builder.update_observation({"long_term_context": f"Step {step}: " + ", ".join(
        f"a {colour} box {step + k} steps ahead" for k, colour in enumerate(["grey", "blue", "green", "purple"]))})
    reply = client.complete(builder.get_prompt(), choices=CHOICES, max_tokens=4)
    calls.append({"tokens_in": reply.tokens_in, "evaluated": client.last_evaluated[0]})
    builder.update_action(reply.action or "go forward")
print(json.dumps({"swa_full": bool(client.llm.context_params.swa_full), "calls": calls}))
"""


def test_the_local_model_reuses_the_prompt_prefix_over_an_episode():
    # llama.cpp's own count (its perf counters) of the prompt tokens each call evaluated: once the
    # window is full BALROG's sliding history changes the prompt right after the instructions and
    # every call evaluates almost all of it; the kept layout evaluates only the new step but at its cuts
    proc = subprocess.run([sys.executable, "-c", PREFIX_EPISODE], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    assert proc.returncode == 0, f"the local model's process exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["swa_full"], "Gemma 3's sliding-window cache must be full-size to cut back to a prefix"
    calls = out["calls"]
    assert calls[0]["evaluated"] >= calls[0]["tokens_in"] - 1
    # a call evaluates what it added to the last prompt, and the last observation (its header was
    # "Current Observation:"), about 45 tokens: a window that slid evaluates its whole history again
    incremental = [now for before, now in zip(calls, calls[1:])
                   if now["evaluated"] <= max(now["tokens_in"] - before["tokens_in"], 0) + 60]
    assert len(incremental) >= (len(calls) - 1) * 2 // 3, calls


def test_a_prompt_too_long_for_the_context_is_cut_in_steps_that_keep_its_prefix():
    from workers.sdk.llm.client import fit

    room, cuts, previous = 100, set(), None
    for n in range(90, 400, 7):  # a prompt growing at its end, past the context
        tokens = fit(list(range(n)), room)
        assert len(tokens) <= room and tokens[:25] == list(range(25)) and tokens[-1] == n - 1
        if previous is not None and len(tokens) > len(previous):  # no new cut: the old prompt is its prefix
            assert tokens[:len(previous)] == previous
        cuts.add(tokens[25] if len(tokens) > 25 and n > room else None)
        previous = tokens
    assert len(cuts) <= 1 + (400 - room) // 25 + 1  # cut in steps of a quarter, not every call


TEAM_TURNS = """
import json
from workers.sdk.llm.client import make_client
seats = [make_client({"n_threads": 2}) for _ in range(2)]  # one model, as a MOSAIC LLM team shares it
out = []
for turn in range(6):
    seat = seats[turn % 2]
    reply = seat.complete([{"role": "system", "content": f"You are seat {turn % 2}. " + "The board has nine squares. " * 30},
                           {"role": "user", "content": f"Turn {turn}. Your action:"}], choices=["left", "right", "up"],
                          max_tokens=4)
    out.append({"tokens_in": reply.tokens_in, "evaluated": seat.last_evaluated[0], "error": reply.error})
print(json.dumps({"calls": out, "same_model": seats[0].llm is seats[1].llm}))
"""


def test_the_seats_of_a_team_keep_their_prompt_prefix_while_taking_turns_on_one_model():
    # llama.cpp's count of the prompt tokens each turn evaluated: the seats' prompts differ from
    # their first tokens, so a turn on the other seat's cache would evaluate all of its prompt again
    proc = subprocess.run([sys.executable, "-c", TEAM_TURNS], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    assert proc.returncode == 0, f"the local model's process exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["same_model"]
    calls = out["calls"]
    assert all(c["error"] is None for c in calls)
    assert all(c["evaluated"] >= c["tokens_in"] // 2 for c in calls[:2]), calls  # each seat's first turn
    assert all(c["evaluated"] <= 20 for c in calls[2:]), calls  # then only the new turn's words
