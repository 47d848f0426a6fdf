"""`mosaic transcript RUN`: an LLM run's steps as text or JSON lines, filtered by agent, episode and text,
followed while the run is live; the API key never printed. One real daemon, one real mosaic_llm run
(tic-tac-toe, two LLM seats) against the local OpenAI-compatible test endpoint (slow on purpose, so the
follow starts while the run is live); no model needed."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import ROOT
from tests.plugins.llm_fault_server import FaultServer
from workers.sdk.llm import keys

KEY = "sk-planted-transcript-8d41c07b9e"


def entries(text: str) -> list[str]:
    """The header line of each step printed (steps are separated by a blank line)."""
    return [block.splitlines()[0] for block in text.strip().split("\n\n") if block.strip()]


def test_transcript_text_json_filters_follow_and_no_key(daemon, mosaic):
    keys.write_key("MOSAIC_TEST_KEY", KEY, home=str(mosaic.home.root))
    with FaultServer(["slow"] * 4, text="4", slow_s=1.0) as server:
        run_id = mosaic.submit("--worker", "mosaic_llm", "--algo", "play", "--env", "tictactoe_v3", "--name", "tx",
                               "--set", 'seats=["llm", "llm"]', "--set", "episodes=2", "--set", "max_steps=2",
                               "--set", "backend=openai", "--set", f"base_url={server.base_url}",
                               "--set", "model=fault-model", "--set", "api_key_env=MOSAIC_TEST_KEY",
                               "--set", "timeout_s=5")
        # started while the run is live (4 calls of 1 s each): it prints each step as it comes, to the end
        follow = subprocess.Popen([sys.executable, "-m", "mosaic_tui.cli", "--home", str(mosaic.home.root),
                                   "transcript", "tx", "--follow"], cwd=str(ROOT), text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        followed, _ = follow.communicate(timeout=180)
        assert mosaic.show(run_id)["state"] == "succeeded"
        assert {r["headers"].get("authorization") for r in server.requests} == {f"Bearer {KEY}"}

    full = mosaic.run("transcript", "tx", check=True).stdout
    assert followed == full
    # episode 0: X takes 4; O replies 4 too, taken: invalid, a random legal move played; episode 1 again
    heads = entries(full)
    assert len(heads) == 4
    assert heads[0].startswith("step 0  agent player_1  episode 0  valid: 4  12→2 tokens")
    assert heads[1].startswith("step 1  agent player_2  episode 0  INVALID: - (played ")
    assert heads[2].startswith("step 2  agent player_1  episode 1  valid: 4")
    first = full.split("\n\n")[0]
    for part in ("  observation:\n", "Legal moves: 0, 1, 2, 3, 4, 5, 6, 7, 8", "  prompt:\n", "Choose one of: 0, 1",
                 "  reply:\n    4"):
        assert part in first
    assert " s" in heads[0].split("tokens")[1]  # the latency

    by_agent = entries(mosaic.run("transcript", "tx", "--agent", "player_2", check=True).stdout)
    assert [h.split("  episode")[0] for h in by_agent] == ["step 1  agent player_2", "step 3  agent player_2"]
    by_episode = entries(mosaic.run("transcript", "tx", "--episode", "1", check=True).stdout)
    assert [h.split("  agent")[0] for h in by_episode] == ["step 2", "step 3"]
    invalid = entries(mosaic.run("transcript", "tx", "--grep", "invalid", check=True).stdout)
    assert [h.split("  agent")[0] for h in invalid] == ["step 1", "step 3"]
    none = mosaic.run("transcript", "tx", "--grep", "no such text")
    assert none.returncode == 0 and none.stdout == "" and "no LLM steps in tx match" in none.stderr

    lines = mosaic.run("transcript", "tx", "--json", check=True).stdout.splitlines()
    steps = [json.loads(line) for line in lines]
    assert [(s["episode"], s["step"], s["agent"]) for s in steps] == [
        (0, 0, "player_1"), (0, 1, "player_2"), (1, 2, "player_1"), (1, 3, "player_2")]
    assert all(s["type"] == "llm_step" and not s.get("partial") and s["prompt"] for s in steps)
    assert [s["valid"] for s in steps] == [True, False, True, False]
    one = mosaic.run("transcript", "tx", "--json", "--agent", "player_1", "--episode", "1", check=True).stdout
    assert [json.loads(line)["step"] for line in one.splitlines()] == [2]

    missing = mosaic.run("transcript", "nope")
    assert missing.returncode != 0 and missing.stderr.startswith("mosaic: error:") \
        and len(missing.stderr.strip().splitlines()) == 1
    for output in (full, followed, "\n".join(lines)):
        assert KEY not in output
