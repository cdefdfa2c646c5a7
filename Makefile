# rmq — build, run and test entry points.  See README.md.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed-stamp
EXTRAS ?= test,bench,spark,dev
PYTEST_ARGS ?=

.PHONY: run test lint bench soak fuzz ext install clean proto rmq5-client

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel

# Editable install of the package and every extra; the extensions are built
# separately (in place) so that a re-build never needs a re-install.
$(STAMP): pyproject.toml setup.py | $(PY)
	$(PIP) install -q "Cython>=3.0" setuptools wheel
	RMQ_BUILD_NO_EXT=1 $(PIP) install -q --no-build-isolation -e ".[$(EXTRAS)]"
	touch $(STAMP)

install: $(STAMP)

# Cython extensions, in place; flock keeps concurrent builds from colliding.
ext: $(STAMP) proto
	flock .build.lock $(PY) setup.py -q build_ext --inplace

# the apache.rocketmq.v2 protocol modules of rmq.proxy (rmq/proxy/codegen.py)
proto: $(STAMP)
	$(PY) -m rmq.proxy.codegen --if-missing

# Apache's official 5.x Python client, in its own environment: its package
# `rocketmq` clashes with the C++ wrapper of the interop tests
.venv-rmq5/.installed-stamp:
	$(PYTHON) -m venv .venv-rmq5
	.venv-rmq5/bin/pip install -q "rocketmq-python-client==5.1.2"
	touch $@

# and Apache's official 5.x Node.js client, pinned by its package-lock.json
tests/rmq5/node/node_modules: tests/rmq5/node/package-lock.json
	cd tests/rmq5/node && npm ci --no-audit --no-fund --loglevel=error
	touch tests/rmq5/node/node_modules

rmq5-client: .venv-rmq5/.installed-stamp tests/rmq5/node/node_modules

run: ext
	$(PY) -m rmq.tools.quickstart

# the interop suite's npm client, pinned by its package-lock.json
tests/interop/node/node_modules: tests/interop/node/package-lock.json
	cd tests/interop/node && npm ci --no-audit --no-fund --loglevel=error
	touch tests/interop/node/node_modules

# Two passes: everything with the compiled extensions, then again with their
# pure-Python twins what has a compiled/twin pair (tests marked ``once`` -- see
# tests/conftest.py -- and ``compiled_only`` run in the first pass only).  Each
# pass ends with its 20 slowest tests, so the time budget stays visible.
DURATIONS := --durations=20 --durations-min=1.0
# the suite mostly waits on broker processes and clients, so it runs in
# TEST_JOBS pytest-xdist workers (every test takes its own free loopback ports;
# a file stays on one worker, in order, as its module fixtures expect)
TEST_JOBS ?= 3
test: ext tests/interop/node/node_modules rmq5-client
	RMQ_REQUIRE_EXTENSIONS=1 $(VENV)/bin/pytest -n $(TEST_JOBS) --dist loadfile $(DURATIONS) $(PYTEST_ARGS)
	RMQ_NO_EXTENSIONS=1 $(VENV)/bin/pytest -n $(TEST_JOBS) --dist loadfile \
	    -m "not soak and not once and not compiled_only" $(DURATIONS) $(PYTEST_ARGS)

soak: ext
	$(VENV)/bin/pytest -m soak $(DURATIONS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check rmq tests bench spark fuzz

# coverage-guided fuzzing of every decoder of outside input, FUZZ_SECONDS per target
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 1
fuzz: ext
	$(PIP) install -q "atheris>=2.3"
	$(PY) -m fuzz.run --seconds $(FUZZ_SECONDS) --jobs $(FUZZ_JOBS)

bench: ext
	$(PY) -m bench.run

clean:
	rm -rf build rmq/_fast/*.so rmq/_fast/*.c
