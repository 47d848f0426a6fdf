"""Where a worker died of a native crash, read from faulthandler's dump on its stderr.

A worker killed by SIGSEGV, SIGILL, SIGBUS, SIGFPE or SIGABRT died inside native code:
llama.cpp, torch, XLA, an env's C++ core. The supervisor starts every worker with
``PYTHONFAULTHANDLER=1``, so Python writes the Python frames of the crashing thread to
stderr before the process dies::

    Fatal Python error: Segmentation fault

    Current thread 0x00007f3c… (most recent call first):
      File ".../site-packages/llama_cpp/_internals.py", line 322 in decode
      File ".../site-packages/llama_cpp/llama.py", line 650 in eval
      ...

The innermost frame in an installed package names the library the crash is in, which
turns "worker killed by SIGSEGV" into "the local model crashed (SIGSEGV in llama.cpp …)".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

NATIVE_CRASH_SIGNALS = {"SIGSEGV", "SIGILL", "SIGBUS", "SIGFPE", "SIGABRT"}

# a package's import name -> the library's own name, where they differ
LIBRARY_NAMES = {"llama_cpp": "llama.cpp", "jaxlib": "JAX (XLA)", "jax": "JAX", "torch": "PyTorch",
                 "ale_py": "the Arcade Learning Environment", "nle": "NetHack (NLE)", "mujoco": "MuJoCo",
                 "vizdoom": "ViZDoom", "ray": "Ray", "numpy": "numpy"}
# libraries whose crash has a fix to name
HINTS = {"llama_cpp": "`python -m workers.sdk.llm.native check` tests the local model and rebuilds it safer"}

_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
_PACKAGE = re.compile(r"[/\\](?:site|dist)-packages[/\\](?P<package>[A-Za-z0-9_]+)(?P<rest>[/\\][^\"]*)?$")


@dataclass(frozen=True)
class CrashSite:
    package: str   # the import name: llama_cpp
    library: str   # what users call it: llama.cpp
    where: str     # llama_cpp/_internals.py:322 in decode

    def reason(self, signal_name: str) -> str:
        hint = HINTS.get(self.package)
        if self.package == "llama_cpp":
            text = f"the local model crashed ({signal_name} in llama.cpp, at {self.where})"
        else:
            text = f"worker killed by {signal_name} in {self.library} (at {self.where})"
        return f"{text}; {hint}" if hint else text


def crash_site(stderr: str) -> CrashSite | None:
    """The innermost installed package in the crashing thread's frames, or None."""
    lines = stderr.splitlines()
    start = None
    for i, line in enumerate(lines):  # the last dump wins: a worker may have crashed a child before
        if line.startswith("Current thread ") or line.startswith("Stack (most recent call first)"):
            start = i + 1
    if start is None:
        return None
    for line in lines[start:]:
        frame = _FRAME.match(line)
        if frame is None:
            if line.strip():
                break  # the end of the thread's frames
            continue
        found = _PACKAGE.search(frame["file"])
        if found:
            package = found["package"]
            rest = (found["rest"] or "").replace("\\", "/")
            where = f"{package}{rest}:{frame['line']} in {frame['func']}"
            return CrashSite(package, LIBRARY_NAMES.get(package, package), where)
    return None


def crash_excerpt(stderr: str, before: int = 5, frames: int = 20) -> str | None:
    """What a user needs of a faulthandler dump: the few lines before it, the fatal error and
    the crashing thread's frames (the whole dump lists every thread and every extension
    module, and its end, which a plain tail shows, is the least telling part)."""
    lines = stderr.splitlines()
    fatal = max((i for i, line in enumerate(lines) if line.startswith("Fatal Python error:")), default=None)
    if fatal is None:
        return None
    current = next((i for i in range(fatal, len(lines)) if lines[i].startswith("Current thread ")), None)
    out = [line for line in lines[max(0, fatal - before):fatal] if line.strip()] + [lines[fatal]]
    if current is not None:
        out.append(lines[current])
        out += [line for line in lines[current + 1:current + 1 + frames] if _FRAME.match(line)]
    return "\n".join(out)


def crash_reason(signal_name: str, stderr: str) -> str | None:
    """The failure reason of a worker a native crash killed, naming the library; None otherwise."""
    if signal_name not in NATIVE_CRASH_SIGNALS:
        return None
    site = crash_site(stderr)
    return site.reason(signal_name) if site else None
