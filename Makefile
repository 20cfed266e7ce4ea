# The two commands a newcomer needs: `make run` and `make test`. Both set up everything from
# scratch (a virtualenv from requirements*.txt, Azurite from package.json) on first use.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PY_STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install run test bench soak mutate package lint format clean

install: $(PY_STAMP) $(NODE_STAMP)

$(PY_STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

# `npm install`, not `npm ci`: the lock file pins every package, but one optional Windows-only
# dependency deep in the Inspector's tree is not served by every registry mirror, and `npm ci`
# refuses a lock file without it while `npm install` skips it as the optional dependency it is.
$(NODE_STAMP): package.json package-lock.json
	npm install --no-audit --no-fund
	touch $@

# The browser tests drive Debian's Chromium (never a downloaded browser).
$(CHROMIUM):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium

## Start Azurite, the Brevo sandbox and the Functions host; Ctrl-C stops them all.
run: install
	$(PY) -m devstack.run

## Lint, then the whole suite (it starts its own Azurite, sandbox and dev hosts).
test: install $(CHROMIUM)
	$(PY) -m ruff check .
	$(PY) -m pytest

## Measure against the physical floor; prints a table, writes bench/results.json (never fails on a time).
bench: install
	$(PY) -m bench

## Two dev hosts under seeded faults (SOAK_SECONDS, default 120; SOAK_SEED); exits 1 on a violation.
soak: install
	$(PY) -m soak

## Mutation testing of the core modules (mutmut, far too slow for `make test`): prints each module's
## score and fails below its floor. MUTATE_TARGETS picks some (purchase governance idempotency
## signatures tokens); MUTATE_JOBS mutants run at once (default 2).
mutate: install
	$(PY) -m tests.mutation $(MUTATE_TARGETS)

## The zip a publish uploads (the tree minus .funcignore), checked and written to dist/storefront.zip.
package:
	$(PYTHON) -m ops.package

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: install
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean:
	rm -rf $(VENV) node_modules .azurite .pytest_cache .ruff_cache dist/storefront.zip
