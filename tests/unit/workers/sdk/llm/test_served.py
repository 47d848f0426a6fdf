"""workers/sdk/llm/served.py: which runs share one server, and how a spec asks for one."""
from __future__ import annotations

import pytest

from workers.sdk.llm import served
from workers.sdk.llm.client import SpecError, normalise_spec


def test_one_key_per_model_context_and_threads():
    key = served.server_key(None, 8192, None)
    assert key == served.server_key(None, 8192, None)
    assert key.startswith("default-8192-")
    assert len({key, served.server_key(None, 4096, None), served.server_key(None, 8192, 2),
                served.server_key("/m/other.gguf", 8192, None)}) == 4
    assert served.server_key("/m/other.gguf", 8192, None).startswith("other-8192-")


def test_only_shared_local_specs_ask_for_a_server():
    assert served.servers_for({"backend": "local"}) == {}
    assert served.servers_for({"backend": "local", "served": "worker"}) == {}
    assert served.servers_for({"backend": "openai", "served": "shared"}) == {}
    one = served.servers_for({"served": "shared", "n_threads": 2})
    assert list(one.values()) == [{"model": None, "n_ctx": 8192, "n_threads": 2}]
    # a MOSAIC LLM team: the default spec and a seat's own, merged over it; same key once
    team = served.servers_for({"backend": "local", "served": "shared",
                               "seats": ["llm", {"kind": "llm", "llm": {"n_threads": 1}},
                                         {"kind": "llm", "llm": {"served": "worker"}}]})
    assert sorted(v["n_threads"] or 0 for v in team.values()) == [0, 1]


def test_the_spec_refuses_shared_for_a_remote_backend_in_one_line():
    assert normalise_spec({"served": "shared"})["served"] == "shared"
    assert normalise_spec({})["served"] == "worker"
    with pytest.raises(SpecError) as err:
        normalise_spec({"backend": "openai", "served": "shared"})
    assert err.value.field == "served" and "\n" not in str(err.value)
    with pytest.raises(SpecError):
        normalise_spec({"served": "somewhere"})


def test_the_server_command_runs_this_module_with_the_key_settings():
    cmd = served.server_command("py", None, 2048, None, 4321)
    assert cmd[:3] == ["py", "-m", "workers.sdk.llm.served"]
    assert cmd[cmd.index("--n_ctx") + 1] == "2048" and cmd[cmd.index("--port") + 1] == "4321"
