"""The local LLM through the balrog worker against llama.cpp alone, on the same prompts; the prompt
prefix kept; episodes in flight against a server.

    python -m bench.bench_llm            # all three
    python -m bench.bench_llm prefix     # the prefix kept (the local model)
    python -m bench.bench_llm server     # episodes in flight, llama.cpp's server behind +200 ms
    python -m bench.bench_llm shared     # 4 runs: 4 copies of the model against one shared server

Managed: a balrog naive run on BabyAI (the local Gemma 3 270M, GBNF grammar over
the six actions) through a daemon; its llm_step events give each call's prompt,
latency and output tokens. Bare: a fresh process loads the same GGUF with the
same settings into llama-cpp-python and sends the same prompts, in the same
order (so llama.cpp's prefix cache helps both alike), with the same grammar,
timing each ``create_completion``. Pairs alternate managed, bare, managed, bare.

Figures: tokens/s of each side (output tokens / model time), the worker's env
steps/s (steps / wall time of its loop, env and telemetry included), and model
time bare / managed on the same prompts (goal >= 0.97: the worker adds nothing
to a call). Both sides run with n_threads=2, one at a time, at the workers' nice
level (bench.common.run_bare).
"""
from __future__ import annotations

import json
import os
import sys
import time

from bench.common import (
    alike,
    alike_settings,
    alternate,
    daemon_home,
    figure,
    median,
    print_table,
    rss_bytes,
    run_bare,
)

ENV = "BabyAI-GoToRedBallGrey-v0"
STEPS = 10
PAIRS = 2
THREADS = 2

BARE = r"""
import json, sys, time
from llama_cpp import Llama, LlamaGrammar
from workers.sdk.llm.client import default_model_path, gbnf_choices
from workers.sdk.llm.babyai import ACTION_LIST
prompts = json.load(open(sys.argv[1]))
llm = Llama(model_path=default_model_path(), n_ctx=8192, n_threads=int(sys.argv[2]), seed=0, verbose=False,
            swa_full=True)
grammar = LlamaGrammar.from_string(gbnf_choices(ACTION_LIST), verbose=False)
out = []
for prompt in prompts:
    tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)
    t = time.monotonic(); n = 0
    for chunk in llm.create_completion(tokens, max_tokens=256, temperature=0.0, grammar=grammar, stream=True, seed=0):
        n += 1
    out.append((time.monotonic() - t, n))
print(json.dumps(out))
"""


def managed(home) -> dict:
    from daemon import protocol as P
    from mosaic_tui.client import Client

    config = {"worker": "balrog", "algo": "naive", "env": ENV, "seed": 1,
              "params": {"episodes": 1, "max_steps_per_episode": STEPS, "n_threads": THREADS}}
    with Client(home, name="bench") as c:
        run = c.call(P.SUBMIT, config=config)
        while c.call(P.GET, run=run["id"])["state"] not in P.FINAL_STATES:
            time.sleep(0.5)
        final = c.call(P.GET, run=run["id"])
    if final["state"] != P.SUCCEEDED:
        raise RuntimeError(f"managed run {final['state']}: {final.get('reason')}")
    events = [json.loads(line) for line in (home.run_dir(run["id"]) / "events.jsonl").read_bytes().splitlines()]
    steps = [e for e in events if e["type"] == "llm_step" and not e.get("partial")]
    started = next(e["t"] for e in events if e["type"] == "run_started")
    ended = next(e["t"] for e in events if e["type"] == "episode")
    return {"prompts": [s["prompt"] + "\n\nAssistant:" for s in steps],
            "model_s": sum(s["latency_s"] for s in steps), "tokens": sum(s["tokens_out"] for s in steps),
            "steps_per_s": len(steps) / (ended - started)}


def bare(prompts: list[str]) -> dict:
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(prompts, f)
        f.flush()
        proc = run_bare([sys.executable, "-c", BARE, f.name, str(THREADS)])
        if proc.returncode != 0:
            raise RuntimeError(f"bare run failed:\n{proc.stderr[-3000:]}")
        out = proc.stdout
    timings = json.loads(out.strip().splitlines()[-1])
    return {"model_s": sum(t for t, _ in timings), "tokens": sum(n for _, n in timings)}


PREFIX = r"""
import json, sys, time
from workers.sdk.llm import client as C
from workers.sdk.llm.babyai import BabyAIText
from workers.sdk.llm.history import HistoryPromptBuilder
keep, steps, threads = sys.argv[1] == "kept", int(sys.argv[2]), int(sys.argv[3])
if not keep:  # the cache as it was: Gemma 3's sliding-window layers on their own small cache
    from llama_cpp import Llama
    path = C.default_model_path()
    C._MODELS[(path, 8192, threads, 0)] = Llama(model_path=path, n_ctx=8192, n_threads=threads, seed=0,
                                                 verbose=False)
client = C.make_client({"n_threads": threads})
env = BabyAIText("BabyAI-GoToRedBallGrey-v0", max_steps=steps)
builder = HistoryPromptBuilder(max_text_history=16, keep_prefix=keep)
obs, done, n, prompt_eval, gen_eval, model_s, episodes = env.reset(seed=1), False, 0, 0, 0, 0.0, 1
builder.update_instruction_prompt(env.instruction_prompt())
started = time.monotonic()
while n < steps:
    if done:
        obs, done, episodes = env.reset(seed=1 + n), False, episodes + 1
        builder.reset()
        builder.update_instruction_prompt(env.instruction_prompt())
    builder.update_observation(obs)
    reply = client.complete(builder.get_prompt(), choices=env.actions, max_tokens=256)
    model_s += reply.latency_s
    prompt_eval += client.last_evaluated[0]
    gen_eval += client.last_evaluated[1]
    action = reply.action or env.default_action
    builder.update_action(action)
    obs, _, terminated, truncated = env.step(action)
    done, n = terminated or truncated, n + 1
wall = time.monotonic() - started
print(json.dumps({"steps_per_s": n / wall, "prompt_per_step": prompt_eval / n, "gen_per_step": gen_eval / n,
                  "model_s": model_s, "episodes": episodes}))
"""
PREFIX_STEPS = int(os.environ.get("BENCH_LLM_PREFIX_STEPS", "100"))


def prefix_side(side: str) -> dict:
    proc = run_bare([sys.executable, "-c", PREFIX, side, str(PREFIX_STEPS), str(THREADS)])
    if proc.returncode != 0:
        raise RuntimeError(f"{side} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def prefix() -> list[dict]:
    """BabyAI naive agent, max_history 16: as it was (BALROG's sliding window, the small SWA cache)
    against the prompt prefix kept (the window cut in halves, swa_full), A B then B A."""
    alike()
    load0 = os.getloadavg()[0]
    before, after = alternate(PAIRS, lambda: prefix_side("before"), lambda: prefix_side("kept"))
    speedups = [a["steps_per_s"] / b["steps_per_s"] for a, b in zip(after, before)]
    load = f"load avg {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"

    def per_step(runs):
        return (f"prompt {median([r['prompt_per_step'] for r in runs]):.0f}, "
                f"completion {median([r['gen_per_step'] for r in runs]):.1f}")
    return [
        figure("BabyAI naive, local model, env steps/s as it was (median)", median([b["steps_per_s"] for b in before]),
               "steps/s", "", f"{PREFIX_STEPS} steps, max_history 16; tokens evaluated per step: {per_step(before)}"),
        figure("the same with the prompt prefix kept (median)", median([a["steps_per_s"] for a in after]),
               "steps/s", "", f"tokens evaluated per step (llama.cpp's count): {per_step(after)}"),
        figure("env steps/s, prefix kept / as it was", median(speedups), "ratio", ">= 3",
               f"pairs: {', '.join(f'{r:.2f}' for r in speedups)}; {load}", median(speedups) >= 3),
    ]


# -- episodes in flight against a server (issue 44 item 2) ---------------------------------------------

SERVER_EPISODES = int(os.environ.get("BENCH_LLM_SERVER_EPISODES", "16"))
SERVER_STEPS = int(os.environ.get("BENCH_LLM_SERVER_STEPS", "2"))
SERVER_IN_FLIGHT = 16
PROXY_DELAY_S = 0.2


class DelayProxy:
    """An HTTP proxy that holds every call ``delay_s`` before passing it on: a remote GPU server's
    round trip in front of a local one. The answer goes back whole (not streamed)."""

    def __init__(self, upstream: str, delay_s: float = PROXY_DELAY_S):
        import http.client
        import threading
        import urllib.parse
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        target = urllib.parse.urlsplit(upstream)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                time.sleep(delay_s)
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
                conn.request("POST", self.path, body, {"content-type": "application/json",
                                                       "authorization": self.headers.get("authorization", "")})
                reply = conn.getresponse()
                data = reply.read()
                self.send_response(reply.status)
                for key in ("content-type", "retry-after"):
                    if reply.getheader(key):
                        self.send_header(key, reply.getheader(key))
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}{target.path}"

    def __enter__(self) -> "DelayProxy":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


PROXY = r"""
import sys, threading
from bench.bench_llm import DelayProxy
with DelayProxy(sys.argv[1]) as proxy:
    print(proxy.base_url, flush=True)
    threading.Event().wait()
"""


class Served:
    """A command that serves HTTP and prints its base URL first (a proxy, the fault server), in a
    process of its own: its threads do not share the worker's interpreter lock."""

    def __init__(self, command: list[str]):
        import subprocess

        from bench.common import ROOT

        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=str(ROOT),
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
        self.base_url = self.proc.stdout.readline().strip()

    def __enter__(self) -> "Served":
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def proxied(upstream: str) -> Served:
    return Served([sys.executable, "-c", PROXY, upstream])


def server_side(base_url: str, model: str, in_flight: int, constrain: str) -> dict:
    """A balrog naive run on BabyAI in this process against ``base_url``: env steps/s, tokens per
    env step and each episode's result (what must not depend on the episodes in flight)."""
    import tempfile

    from workers.balrog_worker import WORKER
    from workers.balrog_worker.runtime import BalrogRun
    from workers.sdk.telemetry import Emitter

    config = WORKER.validate({"worker": "balrog", "algo": "naive", "env": ENV, "params": {
        "backend": "openai", "base_url": base_url, "model": model, "api_key_env": "MOSAIC_BENCH_KEY",
        "constrain": constrain, "max_tokens": 8, "max_text_history": 16, "timeout_s": 600,
        "episodes": SERVER_EPISODES, "max_steps_per_episode": SERVER_STEPS, "episodes_in_flight": in_flight}})
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            with open("events.jsonl", "wb") as out:
                emitter = Emitter(out.fileno())
                started = time.monotonic()
                results = BalrogRun(config, emitter).run()
                wall = time.monotonic() - started
                emitter.close()
        finally:
            os.chdir(cwd)
    totals = results["totals"]
    keys = ("episode", "steps", "episode_return", "success", "progression", "llm_calls", "tokens_in", "tokens_out")
    return {"steps_per_s": totals["steps"] / wall, "wall_s": wall,
            "prompt_per_step": totals["tokens_in"] / totals["steps"],
            "completion_per_step": totals["tokens_out"] / totals["steps"],
            "episodes": [tuple(e[k] for k in keys) for e in results["episodes"]]}


def server() -> list[dict]:
    """BabyAI naive against llama-cpp-python's own server on the local Gemma 3 270M, behind a proxy
    adding 200 ms a call: 16 episodes in flight against 1, one after the other (1, 16). The same
    through the same proxy to tests/plugins/llm_fault_server.py, which answers at once: the worker's own
    ceiling when the server is no bound. The proxy and the fault server run in processes of their own."""
    from tests.plugins.llama_server import MODEL_ALIAS, LlamaServer

    os.environ.setdefault("MOSAIC_BENCH_KEY", "no-key")
    load0 = os.getloadavg()[0]
    with LlamaServer(n_ctx=4096, n_threads=THREADS) as llama, proxied(llama.base_url) as proxy:
        one = server_side(proxy.base_url, MODEL_ALIAS, 1, "grammar")
        many = server_side(proxy.base_url, MODEL_ALIAS, SERVER_IN_FLIGHT, "grammar")
    with Served([sys.executable, "-m", "tests.plugins.llm_fault_server"]) as fault, proxied(fault.base_url) as proxy:
        echo_one = server_side(proxy.base_url, "fault-model", 1, "none")
        echo_many = server_side(proxy.base_url, "fault-model", SERVER_IN_FLIGHT, "none")
    same = many["episodes"] == one["episodes"]
    ratio = many["steps_per_s"] / one["steps_per_s"]
    echo_ratio = echo_many["steps_per_s"] / echo_one["steps_per_s"]
    model_s = one["wall_s"] / (SERVER_EPISODES * SERVER_STEPS) - PROXY_DELAY_S
    load = f"load avg {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    shape = f"{SERVER_EPISODES} episodes x {SERVER_STEPS} steps, max_history 16, +{PROXY_DELAY_S * 1000:.0f} ms a call"
    return [
        figure("llama.cpp server behind +200 ms, env steps/s, 1 episode in flight", one["steps_per_s"], "steps/s", "",
               f"{shape}; tokens per env step: prompt {one['prompt_per_step']:.0f}, "
               f"completion {one['completion_per_step']:.1f}"),
        figure(f"the same, {SERVER_IN_FLIGHT} episodes in flight", many["steps_per_s"], "steps/s", "",
               f"tokens per env step: prompt {many['prompt_per_step']:.0f}, "
               f"completion {many['completion_per_step']:.1f}; per-episode results the same: {same}"),
        figure(f"env steps/s, {SERVER_IN_FLIGHT} in flight / 1 (llama.cpp server)", ratio, "ratio", ">= 10",
               f"llama-cpp-python's server answers one call at a time; model {model_s:.2f} s a call with 1 "
               f"in flight; {load}", ratio >= 10 and same),
        figure(f"env steps/s, {SERVER_IN_FLIGHT} in flight / 1 (an endpoint that answers at once)", echo_ratio,
               "ratio", "", f"{echo_one['steps_per_s']:.2f} -> {echo_many['steps_per_s']:.2f} steps/s; the worker's "
               f"ceiling; same results: {echo_many['episodes'] == echo_one['episodes']}"),
    ]


# -- one model served for several runs (issue 44 item 3) -------------------------------------------

SHARED_RUNS = 4
SHARED_STEPS = int(os.environ.get("BENCH_LLM_SHARED_STEPS", "20"))
SHARED_PAIRS = int(os.environ.get("BENCH_LLM_SHARED_PAIRS", "2"))


def memory_of(pids: set[int]) -> tuple[int, int]:
    """(RSS, PSS) summed over the processes, in bytes: RSS counts the model file's pages once per
    process that maps them, PSS shares them out among those processes."""
    rss = pss = 0
    for pid in pids:
        try:
            rss += rss_bytes(pid)
            with open(f"/proc/{pid}/smaps_rollup") as f:
                pss += next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return rss, pss


def shared_side(home, served: str) -> dict:
    """Four balrog naive runs on BabyAI at once through the daemon, each with its own copy of the
    local model (``served: worker``) or all on one server (``served: shared``): the peak of the
    summed memory of their processes (and the server's), sampled every 0.25 s, and env steps/s of the
    whole set (all steps / submit to the last end, the models' loading included)."""
    from daemon import proctree
    from daemon import protocol as P
    from daemon.model_server import ModelServers
    from mosaic_tui.client import Client

    servers = ModelServers(str(home.root))
    ids, peak_rss, peak_pss = [], 0, 0
    with Client(home, name="bench") as c:
        started = time.monotonic()
        for seed in range(SHARED_RUNS):
            config = {"worker": "balrog", "algo": "naive", "env": ENV, "seed": seed + 1, "params": {
                "episodes": 1, "max_steps_per_episode": SHARED_STEPS, "n_threads": THREADS, "served": served}}
            ids.append(c.call(P.SUBMIT, config=config)["id"])
        while True:
            runs = [c.call(P.GET, run=run_id) for run_id in ids]
            if all(r["state"] in P.FINAL_STATES for r in runs):
                break
            pids = {p for r in runs if r.get("pid") for p in [r["pid"], *proctree.descendants(r["pid"])]}
            pids |= {int(rec["pid"]) for rec in servers.records().values() if set(rec["users"]) & set(ids)}
            rss, pss = memory_of(pids)
            peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
            time.sleep(0.25)
        wall = time.monotonic() - started
    bad = [r for r in runs if r["state"] != P.SUCCEEDED]
    if bad:
        raise RuntimeError(f"{served} run {bad[0]['state']}: {bad[0].get('reason')}")
    steps = sum(json.loads((home.run_dir(i) / "results.json").read_text())["totals"]["steps"] for i in ids)
    deadline = time.monotonic() + 120
    while servers.records() and time.monotonic() < deadline:   # the next side loads its model again
        time.sleep(1)
    return {"rss": peak_rss, "pss": peak_pss, "steps_per_s": steps / wall, "wall_s": wall}


def shared() -> list[dict]:
    """Four runs of the local model at once: four copies (served: worker) against one server
    (served: shared), A B then B A, one daemon allowing the four at once."""
    alike()
    load0 = os.getloadavg()[0]
    with daemon_home(max_runs=SHARED_RUNS) as (home, _pid):
        apart, together = alternate(SHARED_PAIRS, lambda: shared_side(home, "worker"),
                                    lambda: shared_side(home, "shared"))
    mib = 1024 * 1024
    load = f"load avg {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    shape = f"{SHARED_RUNS} balrog naive BabyAI runs at once, {SHARED_STEPS} steps each, n_threads {THREADS}"

    def runs(side, key, scale=1.0):
        return ", ".join(f"{r[key] / scale:.{0 if scale > 1 else 2}f}" for r in side)
    return [
        figure(f"{SHARED_RUNS} runs, each its own model copy: peak memory, RSS summed (median)",
               median([r["rss"] for r in apart]) / mib, "MiB", "",
               f"{shape}; PSS summed {median([r['pss'] for r in apart]) / mib:.0f} MiB; runs: {runs(apart, 'rss', mib)}"),
        figure(f"{SHARED_RUNS} runs on one shared server (served: shared): peak memory, RSS summed (median)",
               median([r["rss"] for r in together]) / mib, "MiB", "",
               f"server included; PSS summed {median([r['pss'] for r in together]) / mib:.0f} MiB; "
               f"runs: {runs(together, 'rss', mib)}"),
        figure(f"{SHARED_RUNS} runs, own copies: env steps/s of the set (median)",
               median([r["steps_per_s"] for r in apart]), "steps/s", "",
               f"all steps / submit to the last end, loading included; runs: {runs(apart, 'steps_per_s')}"),
        figure(f"{SHARED_RUNS} runs, one shared server: env steps/s of the set (median)",
               median([r["steps_per_s"] for r in together]), "steps/s", "",
               f"runs: {runs(together, 'steps_per_s')}; llama.cpp's server answers one call at a time; {load}"),
    ]


def run() -> list[dict]:
    managed_runs, bare_runs = [], []
    alike()
    with daemon_home(max_runs=1) as (home, _pid):
        for _ in range(PAIRS):
            m = managed(home)
            managed_runs.append(m)
            bare_runs.append(bare(m["prompts"]))
    m_tps = [m["tokens"] / m["model_s"] for m in managed_runs]
    b_tps = [b["tokens"] / b["model_s"] for b in bare_runs]
    ratios = [b["model_s"] / m["model_s"] for m, b in zip(managed_runs, bare_runs)]
    load = f"load avg {os.getloadavg()[0]:.1f} at the end"
    return [
        figure("local Gemma 270M through the balrog worker, output tokens/s (median)", median(m_tps), "tokens/s", "",
               f"runs: {', '.join(f'{v:.1f}' for v in m_tps)}; {STEPS} BabyAI steps, grammar over 6 actions"),
        figure("the same prompts, llama-cpp-python alone, output tokens/s (median)", median(b_tps), "tokens/s", "",
               f"runs: {', '.join(f'{v:.1f}' for v in b_tps)}"),
        figure("balrog worker env steps/s with the local model (median)",
               median([m["steps_per_s"] for m in managed_runs]), "steps/s", "", "env, prompt, call, telemetry"),
        figure("model time on the same prompts, bare / through the worker", median(ratios), "ratio", ">= 0.97",
               f"pairs: {', '.join(f'{r:.3f}' for r in ratios)}; {load}; {alike_settings(n_threads=THREADS)}", median(ratios) >= 0.97),
    ]


if __name__ == "__main__":
    CASES = {"prefix": prefix, "server": server, "shared": shared}
    print_table(CASES[sys.argv[1]]() if sys.argv[1:2] and sys.argv[1] in CASES
                else run() + prefix() + server() + shared())
