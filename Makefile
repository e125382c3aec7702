# slurmx: two commands do all set-up on a fresh Debian machine — `make demo` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CLUSTER := docker-slurm/cluster
# The Slurm releases come from one table (slurmx/slurm/versions.txt, its header says the columns): `make test`
# covers those with the role "test", `make test-matrix` every one; the demo and the cluster targets use "default".
VERSION_TABLE := slurmx/slurm/versions.txt
releases = $(shell awk '!/^[[:space:]]*(\#|$$)/ && ("$(1)" == "" || $$5 ~ /(^|,)$(1)(,|$$)/) {print $$1}' $(VERSION_TABLE))
TEST_VERSIONS ?= $(call releases,test)
MATRIX_VERSIONS ?= $(call releases,)
DEMO_VERSION ?= $(call releases,default)
PYTEST_ARGS ?=

.PHONY: all deps venv system-deps images-background demo test test-unit test-integration test-matrix test-native test-daemon-crash lint bench \
        cluster-up cluster-down cluster-status clean dist

all: test

# apt packages the dockerized cluster needs (docker engine, debootstrap for the base image, ssh-keygen), and
# promtool (Debian's prometheus package) for the alert-rule tests, systemd-analyze (Debian's systemd package) for
# the unit-file test.
system-deps:
	@missing=""; for c in dockerd:docker.io debootstrap:debootstrap ssh-keygen:openssh-client promtool:prometheus \
	    systemd-analyze:systemd; do \
	  command -v $${c%%:*} >/dev/null || missing="$$missing $${c##*:}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "need root to apt-get install$$missing" >&2; exit 1; fi; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; fi

$(BIN)/slurmx: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@# the distribution was called slurmx before it became slurmx-hpc: a venv from then still has it
	$(BIN)/pip uninstall -q -y slurmx 2>/dev/null || true
	$(BIN)/pip install -q -e '.[dev,all]'
	@touch $@

venv: $(BIN)/slurmx

deps: system-deps venv

# The wheel and the sdist of slurmx-hpc into dist/ (docs/install.md says what to do with them). The build
# requirements (build, setuptools) are in the dev extra, so it runs offline: no isolated environment to fetch.
dist: venv
	rm -rf dist build
	$(BIN)/python -m build --no-isolation --outdir dist .
	@ls -l dist

lint: venv
	$(BIN)/ruff check slurmx tests bench
	$(BIN)/mypy

test-unit: venv
	$(BIN)/pytest -q tests/unit tests/sim tests/parity $(PYTEST_ARGS)

# Integration tests run against each real Slurm version, the versions side by side (each has its own cluster, and
# live tests mostly wait on Slurm: tests/run-integration); the fixture brings the cluster up (or reuses it). Tests
# marked long_behaviour (live behaviour whose Slurm calls other tests cover on every version) run once, shared by
# two versions' suites so neither is the long pole (tests/run-integration); `make test-matrix` runs every test on
# every version, one version after the other.
PARALLEL_VERSIONS ?= 1
test-integration: deps
	VERSIONS="$(TEST_VERSIONS)" BIN=$(BIN) PARALLEL=$(PARALLEL_VERSIONS) ALL_ON_EVERY_VERSION=$(ALL_ON_EVERY_VERSION) \
	  tests/run-integration $(PYTEST_ARGS)

# The cluster images of TEST_VERSIONS build in the background while lint and the unit tests run (an image build is
# mostly downloads and unpacking; the unit tests use one core); the integration fixture's `cluster up` waits for a
# build in progress and builds what is missing itself, so a failed background build only costs its time.
images-background: system-deps
	@echo "building the cluster images of $(TEST_VERSIONS) in the background (log: /var/tmp/slurmx-images.log)"
	@( for v in $(TEST_VERSIONS); do $(CLUSTER) images --slurm $$v || true; done ) >/var/tmp/slurmx-images.log 2>&1 &

test: deps images-background lint test-unit test-integration

test-matrix: TEST_VERSIONS = $(MATRIX_VERSIONS)
test-matrix: ALL_ON_EVERY_VERSION = 1
test-matrix: PARALLEL_VERSIONS = 0
test-matrix: test-unit test-integration

# slurmxd's crash test at the issue's full size (40 groups, 20 SIGKILLs, 2 slurmctld restarts); `make test` runs a
# smaller default of the same test.
test-daemon-crash: deps
	SLURMX_CRASH_GROUPS=40 SLURMX_CRASH_KILLS=20 SLURMX_CRASH_CTLD_RESTARTS=2 SLURMX_TEST_SLURM=$(DEMO_VERSION) \
	  $(BIN)/pytest -q tests/integration/test_daemon_crash.py $(PYTEST_ARGS)

# The native cluster (host daemons, Debian bookworm's Slurm 22.05, no Docker): needs root; brings it up and down.
test-native: venv
	$(BIN)/pytest -q tests/native $(PYTEST_ARGS)

# AccaSim (a peer HPC simulator) in its own virtualenv, for bench/peer_accasim.py: its dependencies stay out of ours.
PEER_VENV ?= .venv-peer
$(PEER_VENV)/bin/accasim-installed:
	$(PY) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/pip install -q accasim==1.1.3
	@touch $@

bench: venv $(PEER_VENV)/bin/accasim-installed
	@for b in bench/*.py; do $(BIN)/python $$b; done
	$(BIN)/python bench/daemon_cycle.py --groups 100000  # the default run above is 10,000 groups
	$(BIN)/python bench/sim_engine.py --million  # issue 36's 1M-job case (minutes of CPU)

cluster-up: system-deps
	$(CLUSTER) up --slurm $(DEMO_VERSION)

cluster-down:
	$(CLUSTER) down --slurm $(DEMO_VERSION)

cluster-status:
	$(CLUSTER) status --slurm $(DEMO_VERSION)

demo: deps
	$(BIN)/python -m slurmx.cli.demo --slurm $(DEMO_VERSION)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache dist build
