"""The balrog worker through the real daemon and CLI: a misbehaving endpoint, budgets, the key, the local model."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon import protocol as P
from tests.helpers import wait_state
from tests.plugins.llm_fault_server import FaultServer, free_port_url
from workers.balrog_worker import WORKER
from workers.sdk.config import ConfigError
from workers.sdk.llm import keys

KEY = "sk-planted-balrog-5f3c9e1d7a2b"
BABYAI = "BabyAI-GoToRedBallGrey-v0"


def events_of(home, run_id: str) -> list[dict]:
    path = home.run_dir(run_id) / "events.jsonl"
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def llm_steps(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "llm_step" and not e.get("partial")]


def submit(mosaic, algo: str, env: str, *sets: str) -> str:
    args = ["--worker", "balrog", "--algo", algo, "--env", env]
    for s in sets:
        args += ["--set", s]
    return mosaic.submit(*args)


def endpoint(url: str, *more: str) -> tuple[str, ...]:
    return ("backend=openai", f"base_url={url}", "model=fault-model", "api_key_env=MOSAIC_TEST_KEY",
            "backoff_s=0.01", "timeout_s=2", *more)


def test_faults_budget_and_key_never_leaked(daemon, mosaic):
    """Three runs against the misbehaving endpoint, one daemon:
    - a failed call (429 then garbage, after its retries) is recorded and the default action played;
    - on_error=fail with the endpoint down fails the run, naming the reason;
    - a token budget stops a run cleanly, as completed.
    The key, read from <home>/keys (0600), reaches the endpoint and nothing else."""
    home = mosaic.home
    keys.write_key("MOSAIC_TEST_KEY", KEY, home=str(home.root))
    with FaultServer(["429", "garbage", "garbage"], usage=(12, 2)) as server:
        faulty = submit(mosaic, "naive", BABYAI, *endpoint(server.base_url, "retries=2", "max_steps_per_episode=2"))
        down = submit(mosaic, "naive", BABYAI, *endpoint(free_port_url(), "retries=1", "on_error=fail"))
        faulty_run = wait_state(home, faulty, P.FINAL_STATES, timeout=120)
        down_run = wait_state(home, down, P.FINAL_STATES, timeout=120)
        budget = submit(mosaic, "robust_naive", BABYAI,
                        *endpoint(server.base_url, "max_total_tokens=20", "episodes=3"))
        budget_run = wait_state(home, budget, P.FINAL_STATES, timeout=120)
        assert {r["headers"].get("authorization") for r in server.requests} == {f"Bearer {KEY}"}

    assert faulty_run["state"] == P.SUCCEEDED, faulty_run
    steps = llm_steps(events_of(home, faulty))
    assert [s["step"] for s in steps] == [0, 1]
    assert "malformed" in steps[0]["error"] and steps[0]["valid"] is False and steps[0]["played"] == "go forward"
    assert steps[1]["error"] is None and steps[1]["action"] == "go forward" and steps[1]["valid"] is True
    assert faulty_run["summary"]["llm"] == {"calls": 2, "invalid": 1, "errors": 1, "tokens_in": 12, "tokens_out": 2}
    results = json.loads((home.run_dir(faulty) / "results.json").read_text())
    assert results["totals"]["llm_errors"] == 1 and results["totals"]["invalid_rate"] == 0.5

    assert down_run["state"] == P.FAILED
    assert "LLM call failed at step 0" in down_run["reason"] and "down or too slow" in down_run["reason"]

    assert budget_run["state"] == P.SUCCEEDED, budget_run
    assert budget_run["summary"]["phase"] == "token budget reached: 28 of 20 tokens"
    budget_results = json.loads((home.run_dir(budget) / "results.json").read_text())
    assert budget_results["stopped_by_budget"] and len(budget_results["episodes"]) == 1
    assert budget_results["episodes"][0]["steps"] == 2 and budget_results["totals"]["tokens_in"] == 24
    robust = llm_steps(events_of(home, budget))
    assert robust[0]["reply"] == "go forward" and robust[0]["candidate"] == "go forward"  # no tags: the whole reply

    # the transcript export, then every file of the home: the key is nowhere but its 0600 file
    from mosaic_tui.widgets.transcript_view import Transcript, export_transcript
    export_transcript(home, faulty, faulty_run, Transcript(home.run_dir(faulty) / "events.jsonl"))
    key_file = Path(keys.key_file("MOSAIC_TEST_KEY", str(home.root)))
    leaked = [str(p) for p in Path(home.root).rglob("*")
              if p.is_file() and p != key_file and KEY.encode() in p.read_bytes()]
    assert leaked == []
    assert any((Path(home.root) / "exports").glob("transcript-*.jsonl"))


def test_bad_configs_refused_at_submit_with_one_line(daemon, mosaic):
    cases = [
        (("--set", "api_key=sk-x"), "api_key: unknown parameter"),     # a key never goes in a config
        (("--set", "backend=gemini"), "backend"),
        (("--set", "max_cost=1"), "max_cost: a cost budget needs params.price_in"),
        (("--set", "model=/nowhere.gguf"), "model: /nowhere.gguf is not a file"),
        (("--set", "api_key_env=sk key"), "api_key_env"),
    ]
    for sets, expected in cases:
        proc = mosaic.run("submit", "--worker", "balrog", "--algo", "naive", "--env", BABYAI, *sets)
        assert proc.returncode != 0 and expected in proc.stderr, (sets, proc.stderr)
        assert proc.stderr.startswith("mosaic: error:") and proc.stderr.count("\n") == 1
        assert "sk-x" not in proc.stderr
    proc = mosaic.run("submit", "--worker", "balrog", "--algo", "naive", "--env", "BabyAI-GoToRedBal-v0")
    assert "did you mean" in proc.stderr and "BabyAI-GoToRedBall-v0" in proc.stderr
    proc = mosaic.run("submit", "--worker", "balrog", "--algo", "few_shot", "--env", "crafter")
    assert "params.demos: few_shot needs demonstrations" in proc.stderr


def test_descriptor_is_light_and_lists_installed_families():
    import subprocess
    import sys
    code = ("import sys, workers.balrog_worker as b; b.WORKER.capabilities(); b.WORKER.schema('naive'); "
            "heavy = [m for m in ('llama_cpp', 'openai', 'anthropic', 'gymnasium', 'minigrid', 'nle', 'torch') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3]).stdout.strip()
    assert out == "[]"
    caps = WORKER.capabilities()
    assert caps["algorithms"] == ["naive", "cot", "robust_naive", "robust_cot", "few_shot", "random"]
    assert "babyai" in caps["env_families"]
    with pytest.raises(ConfigError, match="mode"):
        WORKER.validate({"worker": "balrog", "algo": "naive", "env": BABYAI, "mode": "eval"})


# -- the real local model, one short episode per env family --------------------------------------
FAMILY_RUNS = [  # (agent, env, extra params): every family, and the agent types that parse differently
    ("naive", BABYAI, ()),
    ("few_shot", BABYAI, ("demo_episodes=1", "max_icl_history=4")),
    ("robust_cot", "crafter", ("max_tokens=16",)),
    ("robust_naive", "textworld-coin", ()),
    ("cot", "MiniHack-Room-5x5-v0", ("max_tokens=16",)),
    ("naive", "NetHackScore-v0", ()),
    ("random", "BabyAI-GoToRedBallGrey-v0", ()),
]


@pytest.mark.long
@pytest.mark.slow
def test_one_episode_per_family_with_the_local_model(daemon, mosaic):
    """No LLM configuration: the local Gemma GGUF through llama.cpp plays two steps of each family."""
    home = mosaic.home
    runs = []
    for agent, env, extra in FAMILY_RUNS:
        sets = ["max_steps_per_episode=2", "max_text_history=2", *extra]
        if agent != "random":
            sets.append("n_threads=1")
        runs.append((agent, env, submit(mosaic, agent, env, *sets)))
    for agent, env, run_id in runs:
        run = wait_state(home, run_id, P.FINAL_STATES, timeout=600)
        assert run["state"] == P.SUCCEEDED, (agent, env, run.get("reason"), run.get("stderr_tail"))
        events = events_of(home, run_id)
        started = next(e for e in events if e["type"] == "run_started")
        results = json.loads((home.run_dir(run_id) / "results.json").read_text())
        assert results["episodes"][0]["steps"] == 2, (agent, env)
        if agent == "random":
            assert llm_steps(events) == [] and "llm" not in run["summary"]
            continue
        assert started["model"] == "gemma-3-270m-q4_k_m.gguf"
        steps = llm_steps(events)
        assert [s["step"] for s in steps] == [0, 1], (agent, env)
        for s in steps:
            assert s["error"] is None and s["tokens_in"] > 50 and s["tokens_out"] >= 1 and s["latency_s"] > 0
            # the prompt has it as BALROG puts it: "Current Observation:", short-term context, long-term
            assert s["observation"] and all(line in s["prompt"] for line in s["observation"].splitlines())
            assert (s["action"] is not None) == s["valid"]
        if agent in ("naive", "robust_naive", "few_shot"):  # constrained by the grammar: always legal
            assert all(s["valid"] for s in steps), (agent, env, [s["reply"] for s in steps])
        if agent == "few_shot":
            assert "START OF DEMONSTRATION EPISODE 1" in steps[0]["prompt"]
        totals = results["totals"]
        assert totals["llm_calls"] == 2 and totals["latency_p50"] > 0 and totals["latency_p99"] >= totals["latency_p50"]
        assert run["summary"]["llm"]["calls"] == 2
        assert "episode/success" in run["summary"]["tags"] and "llm/invalid_rate" in run["summary"]["tags"]


def test_cost_budget_stops_the_run_in_process(tmp_path, monkeypatch, planted_env_key):
    """The cost budget (prices per million tokens): the run stops after the call that reaches it."""
    from workers.balrog_worker.runtime import BalrogRun
    from workers.sdk.telemetry import Emitter

    monkeypatch.chdir(tmp_path)
    with FaultServer(usage=(1000, 10)) as server:  # each call: 1000 x $1 + 10 x $100 per million = $0.002
        config = WORKER.validate({"worker": "balrog", "algo": "naive", "env": BABYAI, "params": {
            "backend": "openai", "base_url": server.base_url, "model": "fault-model", "api_key_env": "MOSAIC_TEST_KEY",
            "price_in": 1.0, "price_out": 100.0, "max_cost": 0.005, "episodes": 2}})
        with open(tmp_path / "events.jsonl", "wb") as out:
            emitter = Emitter(out.fileno())
            results = BalrogRun(config, emitter).run()
            emitter.close()
    assert len(server.requests) == 3                      # $0.002, $0.004, $0.006 >= $0.005: stop
    assert results["stopped_by_budget"] == "cost budget reached: $0.0060 of $0.005"
    assert results["totals"]["cost"] == pytest.approx(0.006) and len(results["episodes"]) == 1
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_bytes().splitlines()]
    assert [e["name"] for e in events if e["type"] == "phase"] == [results["stopped_by_budget"]]
    assert [e["cost"] for e in llm_steps(events)] == [pytest.approx(0.002)] * 3


@pytest.fixture
def planted_env_key(monkeypatch):
    monkeypatch.setenv("MOSAIC_TEST_KEY", KEY)


def test_a_stopped_evaluation_continues_with_the_episodes_not_yet_played(daemon, mosaic):
    """mosaic stop in the middle of an episode: the episodes played so far are kept, the cut one is
    not reported; mosaic continue plays it again from its start, then the rest: every episode once,
    the step counter and the LLM's token counts going on (the budget counts them)."""
    home = mosaic.home
    keys.write_key("MOSAIC_TEST_KEY", KEY, home=str(home.root))
    episodes, per_episode = 40, 5   # 0.25 s an episode: room for the stop to land mid-run
    with FaultServer(["slow"] * 1000, slow_s=0.05, usage=(10, 1)) as server:
        run_id = submit(mosaic, "naive", BABYAI, *endpoint(server.base_url, f"episodes={episodes}",
                                                           f"max_steps_per_episode={per_episode}"))
        wait_state(home, run_id, P.RUNNING, timeout=120)
        from tests.helpers import wait_for
        wait_for(lambda: sum(e["type"] == "episode" for e in events_of(home, run_id)) >= 2, 120, 0.02,
                 what="two episodes")
        assert mosaic.run("stop", run_id, "--timeout", "120").returncode == 0
        run = mosaic.show(run_id)
        assert run["state"] == P.STOPPED, run
        state = json.loads(Path(run["summary"]["stopped"]["checkpoint"]).read_text())
        played = state["next_episode"]
        assert 2 <= played < episodes and [e["episode"] for e in state["episodes"]] == list(range(played))
        assert mosaic.run("continue", run_id, "--wait", timeout=300).returncode == 0
        calls = len(server.requests)
    run = mosaic.show(run_id)
    assert run["state"] == P.SUCCEEDED and run["restarts"] == 1
    results = json.loads((home.run_dir(run_id) / "results.json").read_text())
    assert [e["episode"] for e in results["episodes"]] == list(range(episodes))   # every episode once
    events = events_of(home, run_id)
    assert sum(e["type"] == "episode" for e in events) == episodes
    steps = [s["step"] for s in llm_steps(events)]
    assert steps == list(range(len(steps)))          # the step counter went on: no step twice
    # every call counted once in the totals, the cut episode's too: the budget counts what was spent
    assert results["totals"]["llm_calls"] == calls == len(steps)
    assert results["totals"]["tokens_in"] == 10 * calls and results["totals"]["tokens_out"] == calls


# -- episodes in flight (BALROG's eval.num_workers) -------------------------------------------------

def play_in_process(run_dir: Path, params: dict, continue_from: str | None = None,
                    algo: str = "naive", run_id: str | None = None, **more) -> tuple[dict, list[dict]]:
    """A balrog run (naive by default) on BabyAI in this process, in ``run_dir``: its results and events."""
    import os

    from workers.balrog_worker.runtime import BalrogRun
    from workers.sdk.telemetry import Emitter

    run_dir.mkdir(exist_ok=True)
    cwd = os.getcwd()
    os.chdir(run_dir)
    try:
        config = WORKER.validate({"worker": "balrog", "algo": algo, "env": BABYAI, "params": params, **more})
        config["continue_from"] = continue_from
        config["run_id"] = run_id     # the daemon's config.json has it: frames need it
        with open(run_dir / "events.jsonl", "ab") as out:
            emitter = Emitter(out.fileno())
            try:
                if config["frames"]["enabled"]:   # the worker's play(): frames on stream 0, closed after
                    from workers.balrog_worker.runtime import play
                    play(config, emitter)
                    results = json.loads((run_dir / "results.json").read_text())
                else:
                    results = BalrogRun(config, emitter).run()
            finally:
                emitter.close()
    finally:
        os.chdir(cwd)
    return results, [json.loads(line) for line in (run_dir / "events.jsonl").read_bytes().splitlines()]


@pytest.fixture(scope="module")
def llama_server():
    """llama-cpp-python's own OpenAI-compatible server on the local Gemma 3 270M (tests/plugins/llama_server.py)."""
    from tests.plugins.llama_server import LlamaServer

    with LlamaServer(n_ctx=1024) as server:
        yield server


def real_server_params(server, **more) -> dict:
    from tests.plugins.llama_server import MODEL_ALIAS

    return {"backend": "openai", "base_url": server.base_url, "model": MODEL_ALIAS, "api_key_env": "MOSAIC_TEST_KEY",
            "constrain": "grammar", "temperature": 0.0, "max_tokens": 8, "max_text_history": 1,
            "max_steps_per_episode": 2, "timeout_s": 300, **more}


EPISODE_RESULT = ("episode", "seed", "steps", "episode_return", "success", "progression", "llm_calls",
                  "invalid_actions", "tokens_in", "tokens_out")


def per_episode(results: dict, events: list[dict]) -> list[tuple]:
    """What must not depend on the episodes in flight: each episode's result and its actions."""
    actions: dict[int, list] = {}
    for s in sorted(llm_steps(events), key=lambda s: (s["episode"], s["episode_step"])):
        actions.setdefault(s["episode"], []).append((s["episode_step"], s["action"], s["tokens_in"]))
    return [(tuple(e[k] for k in EPISODE_RESULT), actions[e["episode"]]) for e in results["episodes"]]


@pytest.mark.slow
def test_episodes_in_flight_give_the_sequential_results_on_a_real_server(llama_server, tmp_path, planted_env_key):
    """Five episodes against llama.cpp's server at temperature 0, four in flight and one: the same
    per-episode results and actions, in episode order, though the four were played interleaved
    (each with its own history: the second step's prompt holds the first)."""
    one, one_events = play_in_process(tmp_path / "one", real_server_params(llama_server, episodes=5,
                                                                           max_text_history=4))
    four, four_events = play_in_process(tmp_path / "four", real_server_params(
        llama_server, episodes=5, max_text_history=4, episodes_in_flight=4))
    assert per_episode(four, four_events) == per_episode(one, one_events)
    assert [e["episode"] for e in four["episodes"]] == list(range(5))
    # the episode events came in episode order too, each at the run's step when it was reported
    assert [e["length"] for e in four_events if e["type"] == "episode"] == [e["steps"] for e in four["episodes"]]
    calls = llm_steps(four_events)
    assert sorted(s["step"] for s in calls) == list(range(10))
    played = [s["episode"] for s in calls]
    assert played != sorted(played), played                  # in flight together, not one after another
    assert played[:4] != [0, 0, 1, 1] and set(played[:4]) >= {0, 1, 2}
    assert [s["episode"] for s in llm_steps(one_events)] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert four["totals"]["llm_calls"] == one["totals"]["llm_calls"] == 10
    assert_balrog_layout(tmp_path / "four", four, tmp_path)
    assert four["balrog"]["total_input_tokens"] == four["totals"]["tokens_in"] > 0
    assert four["balrog"]["client"]["model_id"] == one["balrog"]["client"]["model_id"] == one["model"]


@pytest.mark.slow
def test_a_stop_cuts_the_episodes_in_flight_and_continue_replays_only_them(llama_server, tmp_path, planted_env_key,
                                                                          monkeypatch):
    """Four episodes in flight on the real server; episode 0 is slow to start (the fault injected),
    and the stop comes once a later one has finished. Episode 0 and those still in flight are cut;
    continue plays them again and never a finished one: every episode reported once, every call
    counted once."""
    import time

    from workers.balrog_worker import runtime
    from workers.sdk.series import STOP_STATE
    from workers.sdk.stop import SIGNALS, Stopped

    monkeypatch.setattr(SIGNALS, "stop_requested", False)
    original = runtime.BalrogRun.play_episode
    late = [True]   # the first run only

    def episode_zero_late(self, env, agent, episode, stream=0):
        if episode == 0 and late[0]:
            late[0] = False
            while not self.unreported:     # a later episode finished, waiting to be reported after 0
                time.sleep(0.01)
            SIGNALS.stop_requested = True
        return original(self, env, agent, episode, stream)
    monkeypatch.setattr(runtime.BalrogRun, "play_episode", episode_zero_late)
    params = real_server_params(llama_server, episodes=4, episodes_in_flight=4)
    with pytest.raises(Stopped) as stopped:
        play_in_process(tmp_path, params)
    state = json.loads((tmp_path / STOP_STATE).read_text())
    finished = [e["episode"] for e in state["episodes"]]
    assert 0 in state["in_flight"] and finished and not set(finished) & set(state["in_flight"])
    assert sorted(finished + state["in_flight"]) == [0, 1, 2, 3]
    assert state["next_episode"] == 0 and stopped.value.step == state["step"]

    SIGNALS.stop_requested = False
    results, events = play_in_process(tmp_path, params, continue_from=stopped.value.checkpoint)
    assert [e["episode"] for e in results["episodes"]] == [0, 1, 2, 3]
    assert all(e["steps"] == 2 for e in results["episodes"])
    assert sum(e["type"] == "episode" for e in events) == 4          # every episode reported once
    calls = llm_steps(events)
    assert sorted(s["step"] for s in calls) == list(range(len(calls)))   # the step counter went on
    after_continue = calls[len([s for s in calls if s["step"] < state["step"]]):]
    assert {s["episode"] for s in after_continue} == set(state["in_flight"])   # finished ones never replayed
    assert results["totals"]["llm_calls"] == len(calls)            # the cut episodes' calls counted once


def test_a_429_holds_every_episode_in_flight_and_fails_none(tmp_path, planted_env_key):
    """Four episodes in flight; the server's first answer is a 429 with Retry-After 1 s. The call it
    hit waits and succeeds, and the other episodes' next calls wait for the same second."""
    with FaultServer(["429", "slow", "slow", "slow"], slow_s=0.3, retry_after="1") as server:
        results, events = play_in_process(tmp_path, {
            "backend": "openai", "base_url": server.base_url, "model": "fault-model", "api_key_env": "MOSAIC_TEST_KEY",
            "backoff_s": 0.01, "episodes": 4, "episodes_in_flight": 4, "max_steps_per_episode": 3})
        requests = list(server.requests)
    calls = llm_steps(events)
    assert len(calls) == 12 and all(s["error"] is None and s["valid"] for s in calls)
    assert results["totals"]["llm_errors"] == 0 and len(results["episodes"]) == 4
    assert [r["fault"] for r in requests[:4]] == ["429", "slow", "slow", "slow"] and len(requests) == 13
    limited = requests[0]["at"]
    assert min(r["at"] for r in requests[4:]) - limited >= 0.85   # Retry-After 1 s, less the jitter's 10 %


def test_budget_with_episodes_in_flight_stops_them_all(tmp_path, planted_env_key):
    """A 30-token budget, 14 tokens a call, four episodes in flight: one episode alone would stop
    after 3 calls (42 tokens); in flight together, only the calls already in flight when the total
    crossed 30 may add to it (at most 3 more), then no episode starts another call or episode, and
    each that began reports what it played."""
    with FaultServer(["slow"] * 4, slow_s=1.0, usage=(12, 2)) as server:
        results, events = play_in_process(tmp_path, {
            "backend": "openai", "base_url": server.base_url, "model": "fault-model", "api_key_env": "MOSAIC_TEST_KEY",
            "max_total_tokens": 30, "episodes": 8, "episodes_in_flight": 4})
        requests = len(server.requests)
    calls = llm_steps(events)
    assert 3 <= requests <= 3 + 3 and len(calls) == requests, requests
    assert results["stopped_by_budget"] == f"token budget reached: {14 * requests} of 30 tokens"
    started = sorted({s["episode"] for s in calls})
    assert [e["episode"] for e in results["episodes"]] == started and set(started) <= {0, 1, 2, 3}
    assert sum(e["steps"] for e in results["episodes"]) == requests
    assert [e["name"] for e in events if e["type"] == "phase"] == [results["stopped_by_budget"]]


# -- BALROG's results layout ------------------------------------------------------------------------

def assert_balrog_layout(run_dir: Path, results: dict, tmp_path: Path) -> None:
    """The run's per-episode files in BALROG's layout hold results.json's records, and BALROG's own
    summariser (tests/plugins/balrog_upstream.py) makes of them the summaries results.json carries."""
    import shutil

    from tests.plugins.balrog_upstream import collect_and_summarize_results
    from tests.unit.workers.balrog_worker.test_summary import close

    env_name, task = results["family"], results["env"]
    tree = run_dir / "balrog"
    for record in results["episodes"]:
        log = json.loads((tree / env_name / task / f"{task}_run_{record['episode']:02d}.json").read_text())
        assert (log["task"], log["num_steps"], log["progression"], log["episode_return"], log["seed"]) == (
            task, record["steps"], record["progression"], record["episode_return"], record["seed"])
        assert (log["input_tokens"], log["output_tokens"]) == (record.get("tokens_in", 0), record.get("tokens_out", 0))
        assert sum(log["action_frequency"].values()) == record["steps"]
    reference_dir = tmp_path / f"reference-{run_dir.name}"
    shutil.copytree(tree, reference_dir, ignore=shutil.ignore_patterns("*summary.json"))
    reference = collect_and_summarize_results(str(reference_dir))
    assert close(results["balrog"], reference)
    assert close(results["balrog_envs"][env_name],
                 json.loads((reference_dir / env_name / f"{env_name}_summary.json").read_text()))
    assert json.loads((tree / "summary.json").read_text()) == results["balrog"]
    progressions = [e["progression"] for e in results["episodes"]]
    assert results["balrog"]["average_progress"] == pytest.approx(100 * sum(progressions) / len(progressions))
    assert results["totals"]["progression_percentage"] == results["balrog"]["average_progress"]


def test_results_carry_balrogs_summary_as_balrog_makes_it(tmp_path):
    """A real random-agent run on BabyAI: results.json keeps its keys and carries BALROG's
    summary.json and <env>_summary.json, equal to what BALROG's summariser makes of the run's
    episode files; the totals' scalars carry the progression percentage and its standard error."""
    results, events = play_in_process(tmp_path / "run", {"episodes": 12}, algo="random")
    assert {"worker", "agent", "env", "family", "model", "stopped_by_budget", "totals", "episodes"} <= set(results)
    assert_balrog_layout(tmp_path / "run", results, tmp_path)
    successes = sum(e["success"] for e in results["episodes"])
    assert 0 < successes < 12, successes      # the standard error is not trivially 0
    assert results["balrog"]["standard_error"] > 0 and results["balrog"]["client"] is None
    assert results["balrog"]["environments"]["babyai"]["episodes_played"] == 12
    scalars = {e["tag"]: e["value"] for e in events if e["type"] == "scalar"}
    assert scalars["total/progression_percentage"] == pytest.approx(results["balrog"]["average_progress"])
    assert scalars["total/standard_error"] == pytest.approx(results["balrog"]["standard_error"])


# -- frames of every episode in flight ---------------------------------------------------------------

@pytest.mark.slow
def test_every_episode_in_flight_sends_frames_and_the_frames_view_switches_between_them(
        llama_server, tmp_path, planted_env_key):
    """Two episodes in flight on the real server, frames on: each thread's episodes go to a
    FastLane stream of its own (stream 0 as before, for an older app). The frames view starts on
    stream 0, names the streams in its header, and n shows the other episode's frames."""
    import asyncio
    import os

    import numpy as np
    from textual.app import App

    from mosaic_tui.widgets.frames_view import FramesView
    from workers.fastlane import layout
    from workers.fastlane.reader import FrameReader

    run_id = f"balrog-frames-{os.getpid()}"
    try:
        results, events = play_in_process(tmp_path, real_server_params(
            llama_server, episodes=2, episodes_in_flight=2, max_steps_per_episode=1),
            run_id=run_id, frames={"enabled": True, "fps": 100})
        assert len(results["episodes"]) == 2 and {s["episode"] for s in llm_steps(events)} == {0, 1}
        assert layout.list_streams(run_id) == [0, 1]
        newest = {}
        for stream in (0, 1):
            reader = FrameReader(run_id, stream)
            newest[stream] = reader.latest()
            reader.close()
            assert newest[stream] is not None and newest[stream][1].ndim == 3, stream
        assert not np.array_equal(newest[0][1], newest[1][1])     # two episodes, two seeds, two grids

        class FramesApp(App):
            def compose(self):
                yield FramesView(run_id)

        async def watch() -> list[tuple[int, str, object]]:
            seen = []
            app = FramesApp()
            async with app.run_test(size=(100, 30)) as pilot:
                view = app.query_one(FramesView)
                view.focus()
                for _ in range(3):
                    for _ in range(100):
                        await pilot.pause(0.02)
                        if view.current is not None:
                            break
                    seen.append((view.stream, str(view.header_text()), view.current and view.current[1]))
                    await pilot.press("n")
            return seen

        seen = asyncio.run(watch())
        assert [stream for stream, _, _ in seen] == [0, 1, 0]
        for stream, header, frame in seen:
            assert f"stream {stream} ({stream + 1} of 2, n: next)" in header, header
            assert frame is not None and np.array_equal(frame, newest[stream][1]), stream
    finally:
        layout.cleanup(run_id)
