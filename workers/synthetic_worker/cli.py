"""python -m workers.synthetic_worker.cli --config config.json"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

from workers.sdk.rundir import write_state
from workers.sdk.stop import SIGNALS, STOPPED_EXIT, Stopped
from workers.sdk.telemetry import take_stdout

STOP_CHECKPOINT = "checkpoints/stop_{step}.json"   # a stop's checkpoint: the step it stopped at


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    config = json.load(open(parser.parse_args().config))
    p = config["params"]
    time.sleep(p["startup_seconds"])
    emitter = take_stdout()
    SIGNALS.listen_for_stop()   # mosaic stop: checkpoint at the next step, then end
    first = 1
    level = 0.0   # with gain: the return climbs by gain each episode, carried over a stop
    if config.get("continue_from"):   # mosaic continue: the same run, on from the stop's step
        with open(config["continue_from"]) as f:
            saved = json.load(f)
        first = saved["step"] + 1
        level = saved.get("level", 0.0)
    if p["ignore_sigterm"]:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
                for _ in range(p["children"])]
    emitter.run_started(worker="synthetic", algo=config["algo"], env=config["env"],
                        total_steps=config["steps"], children=[c.pid for c in children],
                        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
                        affinity=sorted(os.sched_getaffinity(0)))
    if p["phase"]:
        emitter.phase(p["phase"], step=0)
    # filled, not only reserved: its pages count in the process's resident memory (RSS)
    ballast = bytearray(b"\x01") * (p["allocate_mb"] * 1024 * 1024) if p["allocate_mb"] else None
    frames = None
    if config["frames"]["enabled"]:
        # moving test patterns through FastLane, like a rendered env would
        from workers.fastlane.demo import Patterns, cartpole_frame
        from workers.fastlane.writer import FrameWriter
        frames = (FrameWriter(config["run_id"], max_dim=config["frames"]["max_dim"],
                              max_fps=config["frames"]["fps"]), Patterns())
    emitter.flush()
    while p.get("start_file") and not os.path.exists(p["start_file"]):
        time.sleep(0.001)
    tags = [f"synthetic/value_{i}" for i in range(p["tags"])]
    pad = "x" * p["payload_bytes"]
    interval = 1.0 / p["rate"] if p["rate"] > 0 else 0.0
    start = time.monotonic()
    for step in range(first, config["steps"] + 1):
        if SIGNALS.stop_requested:
            def save() -> str:
                time.sleep(p["stop_save_seconds"])
                state = {"step": step - 1, **({"level": level} if p["gain"] else {})}
                return write_state(STOP_CHECKPOINT.format(step=step - 1), state)
            stopped = Stopped.after(save, step - 1)   # with its manifest, as every worker's stop
            emitter.run_stopped(stopped.step, stopped.checkpoint, stopped.save_s)
            emitter.close()
            time.sleep(p["linger_seconds"])
            return STOPPED_EXIT
        if pad:
            emitter.emit({"v": 1, "type": "scalar", "t": time.time(), "tag": tags[step % len(tags)],
                          "value": float(step), "step": step, "pad": pad})
        else:
            emitter.scalar(tags[step % len(tags)], float(step % 997), step)
        if p["unbuffered"]:
            emitter.flush()
        if frames is not None and frames[0].due():
            n = 0 if p["still_frames"] else step
            frames[0].publish(cartpole_frame(n) if p["frame_pattern"] == "cartpole" else frames[1].frame(n))
        if p["episode_every"] and step % p["episode_every"] == 0:
            level += p["gain"]
            episode_return = level if p["gain"] else float(step % 500)
            emitter.episode(step, episode_return + p["return_offset"], p["episode_every"])
        if p["garbage_every"] and step % p["garbage_every"] == 0:
            emitter.flush()
            os.write(emitter.fd, b"this is not json \xff\xfe\n")
        if interval:
            delay = start + (step - first + 1) * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    emitter.flush()
    del ballast
    if p["hold_seconds"]:
        time.sleep(p["hold_seconds"])
    if p["raise_message"]:
        raise RuntimeError(p["raise_message"])
    if p["die_by_signal"]:
        emitter.close()
        os.kill(os.getpid(), getattr(signal, p["die_by_signal"]))
        time.sleep(10)
    if p["exit_code"]:
        emitter.run_failed(f"synthetic failure with exit code {p['exit_code']}", step=config["steps"])
        emitter.close()
        return p["exit_code"]
    if p["final_checkpoint"]:
        write_state("checkpoints/final.json", {"step": config["steps"]})
        emitter.checkpoint_saved("checkpoints/final.json", config["steps"])
    emitter.run_completed(step=config["steps"])
    emitter.close()
    time.sleep(p["linger_seconds"])
    for child in children:
        child.terminate()
        child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
