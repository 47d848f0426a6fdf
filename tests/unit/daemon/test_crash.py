"""daemon/crash.py: where a worker died of a native crash, read from faulthandler's dump on its stderr."""
from __future__ import annotations

from daemon.crash import crash_excerpt, crash_reason, crash_site

SITE = "/venv/lib/python3.11/site-packages"

DUMP = f"""\
loading the model
step 1
Fatal Python error: Segmentation fault

Thread 0x00007f3c00000001 (most recent call first):
  File "{SITE}/torch/nn/modules/module.py", line 1500 in _call_impl
  File "/work/main/workers/x.py", line 10 in idle

Current thread 0x00007f3c00000002 (most recent call first):
  File "/work/main/workers/sdk/llm/client.py", line 90 in complete
  File "{SITE}/llama_cpp/_internals.py", line 322 in decode
  File "{SITE}/llama_cpp/llama.py", line 650 in eval
  File "/work/main/workers/balrog_worker/runtime.py", line 40 in train

Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)
"""


def test_the_innermost_installed_package_of_the_crashing_thread_is_named():
    site = crash_site(DUMP)
    assert site is not None
    assert (site.package, site.library) == ("llama_cpp", "llama.cpp")
    assert site.where == "llama_cpp/_internals.py:322 in decode"


def test_the_reason_names_the_library_and_the_fix_where_there_is_one():
    assert crash_reason("SIGSEGV", DUMP) == (
        "the local model crashed (SIGSEGV in llama.cpp, at llama_cpp/_internals.py:322 in decode); "
        "`python -m workers.sdk.llm.native check` tests the local model and rebuilds it safer")
    torch = DUMP.replace("llama_cpp/_internals.py", "torch/functional.py")
    assert crash_reason("SIGILL", torch) == "worker killed by SIGILL in PyTorch (at torch/functional.py:322 in decode)"
    unknown = DUMP.replace("llama_cpp/_internals.py", "gizmo/core.py")
    assert crash_reason("SIGBUS", unknown) == "worker killed by SIGBUS in gizmo (at gizmo/core.py:322 in decode)"


def test_a_signal_that_is_no_native_crash_or_a_dump_without_a_package_gives_no_reason():
    assert crash_reason("SIGKILL", DUMP) is None
    assert crash_reason("SIGTERM", DUMP) is None
    assert crash_site("Fatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call first):\n"
                      '  File "/work/main/x.py", line 1 in main\n') is None
    assert crash_site("Traceback (most recent call last):\n  File \"x.py\", line 1\n") is None


def test_the_last_dump_wins_and_the_frames_end_at_the_first_other_line():
    earlier = DUMP.replace("llama_cpp/_internals.py", "ale_py/env.py")
    later = ("Fatal Python error: Aborted\n\nStack (most recent call first):\n"
             f'  File "{SITE}/jaxlib/xla_client.py", line 7 in compile\n')
    site = crash_site(earlier + later)
    assert site is not None and site.library == "JAX (XLA)"
    # a frame after the thread's frames (another section) is not the crashing thread's
    cut = ("Current thread 0x1 (most recent call first):\n  File \"/work/main/a.py\", line 1 in f\n"
           f"Extension modules: x\n  File \"{SITE}/numpy/core.py\", line 3 in g\n")
    assert crash_site(cut) is None


def test_a_windows_path_is_read_as_well():
    dump = ("Current thread 0x1 (most recent call first):\n"
            '  File "C:\\py\\Lib\\site-packages\\mujoco\\sim.py", line 5 in step\n')
    site = crash_site(dump)
    assert site is not None and site.where == "mujoco/sim.py:5 in step" and site.library == "MuJoCo"


def test_the_excerpt_is_the_lines_before_the_fatal_error_and_the_crashing_threads_frames():
    excerpt = crash_excerpt(DUMP, before=2, frames=3)
    assert excerpt == "\n".join([
        "loading the model", "step 1", "Fatal Python error: Segmentation fault",
        "Current thread 0x00007f3c00000002 (most recent call first):",
        '  File "/work/main/workers/sdk/llm/client.py", line 90 in complete',
        f'  File "{SITE}/llama_cpp/_internals.py", line 322 in decode',
        f'  File "{SITE}/llama_cpp/llama.py", line 650 in eval'])
    assert crash_excerpt("Traceback (most recent call last):\nValueError: x\n") is None
