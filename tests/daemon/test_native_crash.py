"""Native crashes: the local model's build for this CPU, and a worker that dies of a signal naming
its library (daemon/crash.py), down to the app's failure band."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from daemon import protocol as P
from daemon.crash import crash_reason, crash_site
from tests.helpers import ROOT, wait_state
from workers.sdk.llm import native

# -- which library a crash is in ----------------------------------------------------------------

FAKELIB = """
import ctypes

def deep_call():
    return ctypes.string_at(0)   # reads address 0: a real SIGSEGV inside native code
"""


def _crash_in_a_package(tmp_path: Path, caller: str) -> subprocess.CompletedProcess:
    """A Python process that dies of SIGSEGV inside an installed package's function, with
    faulthandler on as the supervisor starts every worker."""
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    (site / "fakelib").mkdir(parents=True)
    (site / "fakelib" / "__init__.py").write_text(FAKELIB)
    env = dict(os.environ, PYTHONPATH=str(site), PYTHONFAULTHANDLER="1")
    return subprocess.run([sys.executable, "-c", caller], capture_output=True, text=True, env=env, timeout=60)


def test_a_segfault_names_the_innermost_installed_package(tmp_path):
    caller = textwrap.dedent("""
        import threading, time, fakelib
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()   # another thread in the dump
        def worker_loop():
            fakelib.deep_call()
        worker_loop()
    """)
    proc = _crash_in_a_package(tmp_path, caller)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
    site = crash_site(proc.stderr)
    assert site is not None and site.package == "fakelib", proc.stderr
    assert site.where.startswith("fakelib/__init__.py:") and site.where.endswith(" in deep_call")
    assert crash_reason("SIGSEGV", proc.stderr) == f"worker killed by SIGSEGV in fakelib (at {site.where})"
    # a signal that is no native crash, and a dump with no installed package, say nothing more
    assert crash_reason("SIGKILL", proc.stderr) is None
    assert crash_reason("SIGSEGV", "Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most "
                        "recent call first):\n  File \"/work/x.py\", line 3 in f\n") is None


def test_llama_cpp_crashes_read_as_the_local_model_with_the_fix():
    dump = textwrap.dedent("""\
        Fatal Python error: Segmentation fault

        Thread 0x00007f0000000001 (most recent call first):
          File "/v/lib/python3.11/site-packages/torch/utils/data.py", line 9 in run

        Current thread 0x00007f0000000002 (most recent call first):
          File "/v/lib/python3.11/site-packages/llama_cpp/_internals.py", line 322 in decode
          File "/v/lib/python3.11/site-packages/llama_cpp/llama.py", line 650 in eval
          File "/work/workers/sdk/llm/client.py", line 330 in complete

        Extension modules: numpy.core._multiarray_umath (total: 1)
        """)
    reason = crash_reason("SIGSEGV", dump)
    assert reason.startswith("the local model crashed (SIGSEGV in llama.cpp, at llama_cpp/_internals.py:322 in decode)")
    assert "python -m workers.sdk.llm.native check" in reason


# -- a real BALROG run whose local model crashes inside llama.cpp --------------------------------

# Injected into the worker through PYTHONPATH: the context pointer llama_decode gets is NULL, so
# llama.cpp itself dereferences it (a real SIGSEGV in libllama, under llama_cpp's own frames).
CORRUPT_DECODE = """
from workers.sdk.postimport import when_imported

def corrupt(module):
    real = module.llama_decode
    def llama_decode(ctx, batch):
        return real(None, batch)
    module.llama_decode = llama_decode

when_imported("llama_cpp.llama_cpp", corrupt)
"""


def test_a_balrog_run_whose_local_model_crashes_says_so(tmp_path, home, mosaic, monkeypatch):
    (tmp_path / "sitecustomize.py").write_text(CORRUPT_DECODE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(ROOT)]))
    mosaic.run("daemon", "start", check=True)
    run_id = mosaic.submit("--worker", "balrog", "--algo", "naive", "--env", "BabyAI-GoToRedBallGrey-v0",
                           "--set", "max_steps_per_episode=2", "--set", "n_threads=1")
    run = wait_state(home, run_id, P.FINAL_STATES, timeout=180)
    assert run["state"] == P.FAILED and run["exit_signal"] == "SIGSEGV", run
    assert run["reason"].startswith("the local model crashed (SIGSEGV in llama.cpp, at llama_cpp/"), run["reason"]
    # the stderr tail is the dump's telling part: the fatal error and the crashing thread's frames
    tail = run["stderr_tail"].splitlines()
    assert "Fatal Python error: Segmentation fault" in tail and tail[tail.index(
        "Fatal Python error: Segmentation fault") + 1].startswith("Current thread "), run["stderr_tail"]
    assert any("llama_cpp/" in line for line in tail) and "Extension modules" not in run["stderr_tail"]
    shown = mosaic.run("show", run_id, check=True).stdout
    assert "the local model crashed (SIGSEGV in llama.cpp" in shown
    # the app's failure band says the same
    from mosaic_tui import fmt
    assert fmt.failure_reason(run).startswith("the local model crashed (SIGSEGV in llama.cpp")
    mosaic.run("daemon", "stop")


# -- the build ------------------------------------------------------------------------------------

SAPPHIRE_RAPIDS = ("flags : fpu sse4_2 avx f16c fma bmi2 avx2 avx512f avx512cd avx512vl avx512dq avx512bw "
                   "avx512vbmi avx512_vnni avx512_bf16 avx_vnni amx_tile amx_int8 amx_bf16\n")
ZEN3 = "flags : fpu sse4_2 avx f16c fma bmi2 avx2\n"


def test_flags_name_each_instruction_set_and_never_amx():
    spr = native.detected_options(native.cpu_flags(SAPPHIRE_RAPIDS))
    args = native.cmake_args(spr)
    assert "-DGGML_NATIVE=OFF" in args and "-DGGML_AVX512_VNNI=ON" in args and "-DGGML_AVX_VNNI=ON" in args
    assert "-DGGML_AMX_TILE=OFF" in args and "-DGGML_AMX_INT8=OFF" in args and "AMX_TILE=ON" not in args
    zen3 = native.detected_options(native.cpu_flags(ZEN3))
    assert zen3 == native.X86_V3 and "-DGGML_AVX512=OFF" in native.cmake_args(zen3)
    # avx512 extensions without avx512f itself are never compiled in
    assert not any(o.startswith("AVX512") for o in native.detected_options({"avx512_vnni", "avx2"}))
    if native.platform.machine() == "x86_64":
        sets = native.option_sets(native.cpu_flags(SAPPHIRE_RAPIDS))
        assert sets[1:] == [native.X86_V3, ()]      # safer builds to fall back to, ending at plain x86-64
        assert native.option_sets(native.cpu_flags(ZEN3)) == [native.X86_V3, ()]
        assert native.wheel_dir(sets[0]) != native.wheel_dir(sets[1])   # a wheel per flag set


def _amx_instructions(path: Path) -> list[str]:
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return [line.strip() for line in out.splitlines()
            if any(f"\t{op}" in line or f" {op} " in line for op in ("ldtilecfg", "tileloadd", "tdpbssd"))]


@pytest.mark.skipif(native.platform.machine() != "x86_64", reason="AMX is x86-64's")
def test_the_installed_llama_cpp_has_no_amx_code(tmp_path):
    """The AMX kernels faulted on a Xeon whose hypervisor said AMX works: none may be compiled in."""
    # the check itself finds AMX where there is some (assembled here: no AMX CPU is needed to assemble)
    (tmp_path / "amx.s").write_text(".text\n.globl f\nf:\n  ldtilecfg (%rdi)\n  tdpbssd %tmm2, %tmm1, %tmm0\n  ret\n")
    subprocess.run(["as", "-o", str(tmp_path / "amx.o"), str(tmp_path / "amx.s")], check=True)
    assert len(_amx_instructions(tmp_path / "amx.o")) == 2
    import importlib.util
    lib_dir = Path(importlib.util.find_spec("llama_cpp").origin).parent / "lib"
    libs = sorted(lib_dir.glob("libggml-cpu*.so*"))
    assert libs, f"no libggml-cpu in {lib_dir}"
    for lib in libs:
        assert _amx_instructions(lib) == [], f"{lib} holds AMX instructions: build it with workers/sdk/llm/native.py"


def test_the_install_check_names_a_crash_of_the_local_model(monkeypatch):
    from workers.sdk.llm.client import default_model_path
    path = default_model_path()
    assert native.check_once(path) is None       # the build installed here answers
    monkeypatch.setenv("MOSAIC_LLAMA_CHECK_FAULT", "SIGILL")
    assert native.check_once(path) == "the local model crashed (SIGILL in llama.cpp)"


# -- another worker: CleanRL's script dying inside torch ------------------------------------------

# Injected through PYTHONPATH (CleanRL's own sitecustomize runs the one it shadows): the first
# optimizer step reads address 0 from a hook torch itself calls, under torch's own frames.
CRASH_IN_TORCH = """
from workers.sdk.postimport import when_imported

def crash_on_step(module):
    import ctypes
    def hook(optimizer, args, kwargs):
        ctypes.string_at(0)
    module.register_optimizer_step_pre_hook(hook)

when_imported("torch.optim.optimizer", crash_on_step)
"""


def test_a_cleanrl_run_whose_script_crashes_inside_torch_names_it(tmp_path, home, mosaic, monkeypatch):
    (tmp_path / "sitecustomize.py").write_text(CRASH_IN_TORCH)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(ROOT)]))
    mosaic.run("daemon", "start", check=True)
    run_id = mosaic.submit("--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "2048",
                           "--set", "num-steps=32")
    run = wait_state(home, run_id, P.FINAL_STATES, timeout=180)
    assert run["state"] == P.FAILED and run["exit_signal"] == "SIGSEGV", run
    assert run["reason"].startswith("worker killed by SIGSEGV in PyTorch (at torch/optim/"), run["reason"]
    assert "ppo was killed by SIGSEGV" in run["reason"]        # the worker's own word on its script
    mosaic.run("daemon", "stop")


def test_a_build_that_crashes_is_rebuilt_safer_and_the_install_ends_with_one_line(monkeypatch, capsys):
    """`native check` on a build whose child dies: the next safer flag set is installed and checked,
    down to plain x86-64, and then one line says what to do. The crash is real (the installed model
    loads, then the child kills itself with SIGILL, as an instruction its CPU lacks would); the
    rebuilds are recorded instead of run (each is a few minutes of compiling)."""
    from workers.sdk.llm.client import default_model_path
    monkeypatch.setenv("MOSAIC_LLAMA_CHECK_FAULT", "SIGILL")
    monkeypatch.setattr(native, "option_sets", lambda flags=None: [("AVX2", "FMA"), native.X86_V3, ()])
    monkeypatch.setattr(native, "marker", lambda: Path("/nonexistent/.mosaic-llama"))
    installed = []
    monkeypatch.setattr(native, "install", installed.append)
    assert native.check(default_model_path()) == 1
    assert installed == [native.X86_V3, ()]
    err = capsys.readouterr().err.splitlines()
    assert err[0] == ("llama.cpp: the local model crashed (SIGILL in llama.cpp) with the build for x86-64 avx2+fma, "
                      "no AMX; rebuilding for x86-64 sse42+avx+f16c+fma+bmi2+avx2, no AMX")
    assert err[-1].startswith("llama.cpp: no build of llama-cpp-python runs on this CPU: local-model runs will fail")
