"""The local LLM's native library (llama.cpp through llama-cpp-python), built to run on this CPU.

    python -m workers.sdk.llm.native install   # build (or take from the cache) and install
    python -m workers.sdk.llm.native check     # a tiny completion in a subprocess; rebuild safer if it dies
    python -m workers.sdk.llm.native flags     # the CMake flags this CPU gets, and why

llama-cpp-python has no wheel on PyPI for Linux x86-64: pip builds llama.cpp from source,
and by default with ``-march=native``. That build enabled llama.cpp's AMX kernels on a
Xeon whose hypervisor reports AMX and grants the permission, and whose ``ldtilecfg`` then
faulted: every local-model run died of SIGSEGV in ``libggml-cpu.so``. So the build here
never uses ``GGML_NATIVE``: it names the instruction sets this CPU reports, one by one,
and leaves AMX out everywhere (a 270M model gains nothing measurable from it).

The wheel is built once per flag set into ``~/.cache/mosaic-tui/llama/<key>/`` (pip's own
wheel cache is keyed by the source, not by the flags, and would hand back an old native
build), then installed into the running interpreter's environment. ``check`` loads the
default model in a child process and completes eight tokens; a child that dies of a
signal gets the next safer flag set built and checked, down to plain x86-64, and the
command ends with one line that names the signal and what was done.

Nothing here imports llama_cpp: the install runs before the package's other dependencies.
"""
from __future__ import annotations

import hashlib
import os
import platform
import signal
import subprocess
import sys
from pathlib import Path

VERSION = "0.3.36"  # constraints.txt pins the same

# The CPU flag (/proc/cpuinfo) each GGML option needs; AMX_TILE/INT8/BF16 are never enabled.
X86_OPTIONS = [
    ("SSE42", ("sse4_2",)),
    ("AVX", ("avx",)),
    ("F16C", ("f16c",)),
    ("FMA", ("fma",)),
    ("BMI2", ("bmi2",)),
    ("AVX2", ("avx2",)),
    ("AVX_VNNI", ("avx_vnni",)),
    # GGML_AVX512 compiles with -mavx512f/cd/vl/dq/bw: all five or none
    ("AVX512", ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")),
    ("AVX512_VBMI", ("avx512vbmi",)),
    ("AVX512_VNNI", ("avx512_vnni",)),
    ("AVX512_BF16", ("avx512_bf16",)),
]
# Safer sets to fall back to when a build dies: x86-64-v3 (every x86-64 server since 2013), then plain x86-64.
X86_V3 = ("SSE42", "AVX", "F16C", "FMA", "BMI2", "AVX2")
CHECK_PROMPT = "The capital of France is"


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The instruction-set flags this CPU reports (``/proc/cpuinfo``; ``cpuinfo`` given: that text's)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def detected_options(flags: set[str]) -> tuple[str, ...]:
    """The GGML instruction-set options this CPU supports (AMX left out)."""
    options = [name for name, needs in X86_OPTIONS if all(f in flags for f in needs)]
    if "AVX512" not in options:  # the AVX512 extensions are only compiled in beside AVX512 itself
        options = [o for o in options if not o.startswith("AVX512")]
    return tuple(options)


def option_sets(flags: set[str] | None = None) -> list[tuple[str, ...]]:
    """The flag sets to try, best first: what this CPU reports, x86-64-v3, plain x86-64."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return [("native",)]  # no AMX outside x86; llama.cpp's own native build
    flags = cpu_flags() if flags is None else flags
    sets = [detected_options(flags)]
    if set(X86_V3) <= set(sets[0]) and sets[0] != X86_V3:
        sets.append(X86_V3)
    if sets[-1]:
        sets.append(())
    return sets


def cmake_args(options: tuple[str, ...]) -> str:
    """The ``CMAKE_ARGS`` of a build with the instruction sets ``options`` (``("native",)``: llama.cpp's own)."""
    if options == ("native",):
        return ""
    names = [name for name, _ in X86_OPTIONS]
    args = ["-DGGML_NATIVE=OFF"]
    args += [f"-DGGML_{name}={'ON' if name in options else 'OFF'}" for name in names]
    args += ["-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"]
    return " ".join(args)


def describe(options: tuple[str, ...]) -> str:
    """A flag set in words, for the build's and the check's messages."""
    if options == ("native",):
        return "llama.cpp's native build"
    return "x86-64 " + ("+".join(o.lower() for o in options) if options else "baseline") + ", no AMX"


def cache_dir() -> Path:
    """Where the built wheels are kept: ``$XDG_CACHE_HOME/mosaic-tui/llama`` (``~/.cache`` by default)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "mosaic-tui" / "llama"


def wheel_dir(options: tuple[str, ...]) -> Path:
    """The wheel folder of one flag set, keyed by the version, the Python and the CMake flags."""
    key = hashlib.sha256(f"{VERSION} {platform.python_version()} {cmake_args(options)}".encode()).hexdigest()[:12]
    return cache_dir() / f"{VERSION}-{key}"


def marker() -> Path:
    """Which flag set the environment's llama-cpp-python was built with."""
    return Path(sys.prefix) / ".mosaic-llama"


def build(options: tuple[str, ...]) -> Path:
    """The wheel built with ``options``, from the cache or built now (a few minutes, once); exits naming a failed build."""
    target = wheel_dir(options)
    wheels = sorted(target.glob("llama_cpp_python-*.whl"))
    if wheels:
        return wheels[-1]
    print(f"llama.cpp: building llama-cpp-python {VERSION} for {describe(options)} (a few minutes, once)",
          flush=True)
    partial = target.with_name(target.name + f".{os.getpid()}.partial")
    env = dict(os.environ, CMAKE_ARGS=cmake_args(options))
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-cache-dir",
                           "-w", str(partial), f"llama-cpp-python=={VERSION}"], env=env)
    if proc.returncode != 0:
        raise SystemExit(f"llama.cpp: the build of llama-cpp-python {VERSION} failed (exit {proc.returncode}); "
                         "it needs a C++ compiler and cmake's Python package (pip installs it)")
    os.replace(partial, target)
    return sorted(target.glob("llama_cpp_python-*.whl"))[-1]


def install(options: tuple[str, ...]) -> None:
    """Install the wheel of ``options`` into this interpreter's environment, unless it is installed already."""
    wheel = build(options)
    if marker().exists() and marker().read_text().strip() == str(wheel) and _installed():
        return
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
                   check=True)
    marker().write_text(f"{wheel}\n")


def _installed() -> bool:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("llama_cpp_python") == VERSION
    except PackageNotFoundError:
        return False


CHECK = r"""
import os, signal, sys
fault = os.environ.get("MOSAIC_LLAMA_CHECK_FAULT")  # tests only: the crash a broken build gives
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=int(sys.argv[2]), seed=0, verbose=False)
if fault:
    os.kill(os.getpid(), getattr(signal, fault))
out = llm.create_completion(sys.argv[3], max_tokens=8, temperature=0.0)
print(repr(out["choices"][0]["text"]))
"""


def check_once(model_path: str, timeout: float = 300.0) -> str | None:
    """None when the model completes in a child process, else one line saying how it died."""
    try:
        proc = subprocess.run([sys.executable, "-c", CHECK, model_path, str(min(os.cpu_count() or 1, 4)),
                               CHECK_PROMPT], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"the local model did not complete 8 tokens in {timeout:.0f} s"
    if proc.returncode < 0:
        return f"the local model crashed ({signal_name(-proc.returncode)} in llama.cpp)"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"the local model failed (exit {proc.returncode}): {last}"
    return None


def signal_name(number: int) -> str:
    """A signal's name (``SIGSEGV``), or ``signal N`` for a number that names none."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def check(model_path: str) -> int:
    """Check the installed build; where it dies, install the next safer build and check again."""
    sets = option_sets()
    current = marker().read_text().strip() if marker().exists() else ""
    start = next((i for i, o in enumerate(sets) if current.startswith(str(wheel_dir(o)))), 0)
    for i in range(start, len(sets)):
        if i > start:
            install(sets[i])
        problem = check_once(model_path)
        if problem is None:
            print(f"llama.cpp: the local model answers ({describe(sets[i])})")
            return 0
        safer = f"; rebuilding for {describe(sets[i + 1])}" if i + 1 < len(sets) else ""
        print(f"llama.cpp: {problem} with the build for {describe(sets[i])}{safer}", file=sys.stderr, flush=True)
    print("llama.cpp: no build of llama-cpp-python runs on this CPU: local-model runs will fail; "
          "use an API backend (backend=openai or anthropic) or report the CPU's flags (/proc/cpuinfo)",
          file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    """``install``, ``check [MODEL]`` or ``flags`` (the module's docstring); the exit status."""
    args = sys.argv[1:] if argv is None else argv
    command = args[0] if args else "flags"
    if command == "install":
        install(option_sets()[0])
        return 0
    if command == "check":
        from workers.sdk.llm.client import default_model_path
        return check(args[1] if len(args) > 1 else default_model_path())
    if command == "flags":
        for options in option_sets():
            print(f"{describe(options)}: CMAKE_ARGS=\"{cmake_args(options)}\"")
        return 0
    print(f"usage: python -m workers.sdk.llm.native install|check [MODEL]|flags (not {command!r})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
