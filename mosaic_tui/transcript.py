"""An LLM run's transcript as plain text: what the app's Transcript tab shows and `mosaic transcript` prints.

A transcript is the run's ``llm_step`` events (docs/telemetry.md#llm-steps), one
entry per (step, agent): partial events stream a reply in, the final event
replaces them. ``Transcript`` reads them incrementally from a run's events file;
``entry_text`` writes one entry as text; ``step_matches`` is the filter of both
clients (agent, episode, a search string); ``export_transcript`` writes the
JSONL and Markdown export. No Textual here: the CLI imports it.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from workers.sdk import telemetry as tm

READ_CHUNK = 4 * 1024 * 1024
LLM_WORKERS = ("balrog", "mosaic_llm")
PROMPT_TAIL_CHARS = 600


def transcript_enabled(run: dict | None) -> bool:
    """Does the run have (or will it have) a transcript? An LLM worker's, or one with LLM calls."""
    if not run:
        return False
    return run.get("worker") in LLM_WORKERS or bool((run.get("summary") or {}).get("llm"))


class Transcript:
    """The entries of one run, read incrementally from its events file."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.entries: dict[tuple[int, str], dict[str, Any]] = {}
        self.order: list[tuple[int, str]] = []

    def poll(self) -> list[tuple[int, str]]:
        """Read what was appended; the keys of the entries that changed."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(READ_CHUNK)
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        changed = []
        for line in data[:end].split(b"\n"):
            if b'"llm_step"' not in line:  # most lines are scalars: skip them unparsed
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("type") != tm.LLM_STEP:
                continue
            key = (int(event.get("step", 0)), str(event.get("agent", "0")))
            if key not in self.entries:
                self.order.append(key)
                self.entries[key] = event
            elif event.get("partial") and not self.entries[key].get("partial"):
                continue  # a late partial never replaces the record
            else:
                self.entries[key] = event
            changed.append(key)
        return changed

    def agents(self) -> list[str]:
        return sorted({agent for _, agent in self.order}, key=lambda a: (len(a), a))


def entry_text(event: dict[str, Any], full_prompt: bool = False) -> str:
    """An entry as plain text: what the screen shows and search looks in."""
    partial = event.get("partial")
    head = f"step {event.get('step')}  agent {event.get('agent')}"
    if event.get("episode") is not None:
        head += f"  episode {event.get('episode')}"
        if event.get("episode_step") is not None:   # episodes played in parallel interleave their steps
            head += f" step {event['episode_step']}"
    if partial:
        head += "  … streaming"
    else:
        mark = "valid" if event.get("valid") else "INVALID"
        head += f"  {mark}: {event.get('action') if event.get('action') is not None else '-'}"
        if event.get("played") and event.get("played") != event.get("action"):
            head += f" (played {event['played']})"
        head += f"  {event.get('tokens_in', 0)}→{event.get('tokens_out', 0)} tokens"
        if isinstance(event.get("latency_s"), (int, float)):
            head += f"  {event['latency_s']:.2f} s"
        if isinstance(event.get("cost"), (int, float)):
            head += f"  ${event['cost']:.5f}"
    lines = [head]
    if event.get("error"):
        lines.append(f"  error: {event['error']}")
    if not partial:
        lines.append("  observation:")
        lines.extend("    " + line for line in str(event.get("observation", "")).splitlines())
        prompt = str(event.get("prompt", ""))
        if not full_prompt and len(prompt) > PROMPT_TAIL_CHARS:
            prompt = "… " + prompt[-PROMPT_TAIL_CHARS:]
        lines.append("  prompt:" + ("" if full_prompt else " (p: whole)"))
        lines.extend("    " + line for line in prompt.splitlines())
    lines.append("  reply:")
    lines.extend("    " + line for line in (str(event.get("reply", "")).splitlines() or [""]))
    return "\n".join(lines)


def step_matches(event: dict[str, Any], agent: str | None = None, episode: int | None = None,
                 text: str = "") -> bool:
    """Is this step among those asked for: its agent, its episode, ``text`` anywhere in it (any case)?"""
    if agent is not None and str(event.get("agent")) != agent:
        return False
    if episode is not None and event.get("episode") != episode:
        return False
    return not text or text.lower() in entry_text(event, full_prompt=True).lower()


def export_transcript(home, run_id: str, run: dict | None, transcript: Transcript) -> str:
    """The run's transcript as ``<home>/exports/transcript-<run>-<time>.jsonl`` (final
    events, one a line) and ``.md`` beside it; the path without its extension."""
    transcript.poll()
    out_dir = Path(home.root) / "exports"
    out_dir.mkdir(parents=True, exist_ok=True)
    name = (run or {}).get("name") or run_id
    stem = out_dir / f"transcript-{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    events = [transcript.entries[key] for key in transcript.order]
    with open(f"{stem}.jsonl", "w", encoding="utf-8") as f:
        for event in events:
            f.write(json.dumps(event, ensure_ascii=False) + "\n")
    with open(f"{stem}.md", "w", encoding="utf-8") as f:
        f.write(f"# Transcript of {name}\n\n")
        if run:
            f.write(f"{run.get('worker')}/{run.get('algo')} on {run.get('env')}\n\n")
        for event in events:
            f.write("```\n" + entry_text(event, full_prompt=True) + "\n```\n\n")
    os.chmod(f"{stem}.jsonl", 0o644)
    return str(stem)
