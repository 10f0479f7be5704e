# Every target bootstraps .venv on a fresh machine that has only python3 and make.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORE_STAMP := $(VENV)/.installed-core

.PHONY: test check sweep coverage lint format clean

# Python writes its bytecode caches (__pycache__, git-ignored) even where the caller's
# environment asks it not to (PYTHONDONTWRITEBYTECODE, which some shells and CI runners set):
# otherwise every process the suite starts (a CLI run, a target's zygote, a fresh child)
# compiles the project from source again, about 0.3 s of CPU each for `import sim`.
unexport PYTHONDONTWRITEBYTECODE

# The postgres extra (PostgresStore's driver; its tests start a throw-away cluster), the targets'
# extras (tests/sim/targets crash-test real installs of each runtime) and the dask extra
# (tests/sim/explore/test_campaign_dask.py runs campaigns on a real Dask cluster).
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,postgres,langgraph,dbos,pydantic-ai,llama-index,agent-framework,temporal,openai-agents,dask]'
	touch $(STAMP) $(CORE_STAMP)

# The main job needs the core only (trio, pydantic, hypothesis, faker, rich, apsw): `make sweep`
# and `make campaign` install nothing of the targets' frameworks. A venv `make test` made already
# has it all (its stamp is this one's too).
$(CORE_STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $(CORE_STAMP)

# The suite on every core (pytest-xdist): its tests are independent and most of them sweep.
# worksteal: a worker that runs out of tests takes queued ones from the other, so one long test
# at the end of a queue does not leave a core idle for its length. The 20 slowest tests are
# printed, so a test that grows into the slow tier shows up (CONTRIBUTING.md, "Tests").
TEST_JOBS ?= auto
PYTEST := $(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal --durations=20

# The lint, the type checker, then the fast tier: every test not marked slow (under 5 minutes
# on 2 cores).
test: lint typecheck
	$(PYTEST)

# The slow tier alone: the tests make test leaves out.
.PHONY: slow
slow: $(STAMP)
	$(PYTEST) --run-slow -m slow

# The whole suite: make test, then the slow tier (what CI runs, .ci/run).
check: test slow

# The CI tier: every scenario x store at once, JOBS at a time (default: every core; the report is
# the same). Each trace is swept exhaustively except one longer than the tier's threshold (36
# of the 64 today), which runs a stratified sample (sim/explore/tier.py, docs/campaigns.md).
JOBS ?=
sweep: $(CORE_STAMP)
	$(BIN)/durable-sim sweep --store both --crash process,power,storage,pause --out reports/latest $(if $(JOBS),--jobs $(JOBS))

# The exhaustive campaign: every crash point of every scenario x store (resumable: run it again
# to finish), then FUZZ_BUDGET of schedule and world-machine fuzzing on the file store (fuzz runs
# one store at a time; empty: none).
.PHONY: campaign
FUZZ_BUDGET ?= 10m
campaign: $(CORE_STAMP)
	$(BIN)/durable-sim campaign --store both --crash process,power,storage,pause --out reports/campaign $(if $(JOBS),--jobs $(JOBS))
	$(if $(FUZZ_BUDGET),$(BIN)/durable-sim fuzz --store file --budget $(FUZZ_BUDGET) $(if $(JOBS),--jobs $(JOBS)))

# The runtimes' generated table: every target x durability x variant, every crash point, in
# real processes (hours on 2 cores): docs/scoreboard.md and docs/scoreboard.json.
.PHONY: scoreboard
scoreboard: $(STAMP)
	$(BIN)/durable-sim scoreboard

# Which recovery branches of durable/ the default sweep and the fuzzer reach (many minutes).
coverage: $(STAMP)
	$(BIN)/durable-sim coverage

# The type checker, strict on durable/, sim/ and tests/: the directories are [tool.mypy]'s
# `files` in pyproject, their one home (tests/project/test_types.py runs the same bare mypy).
.PHONY: typecheck
typecheck: $(STAMP)
	$(BIN)/mypy

lint: $(STAMP)
	$(BIN)/ruff check durable sim tests
	$(BIN)/ruff format --check durable sim tests

format: $(STAMP)
	$(BIN)/ruff format durable sim tests
	$(BIN)/ruff check --fix durable sim tests

clean:
	rm -rf $(VENV) reports/latest
