# session-journal: the commands a newcomer runs. `make help` lists them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
DOCS_STAMP := $(VENV)/.installed-docs
# The operator page's JavaScript tools (ESLint), pinned by package-lock.json.
NODE_STAMP := node_modules/.installed

.DEFAULT_GOAL := help

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,dev,postgresql,web]'
	touch $(STAMP)

.PHONY: help install run test test-js test-fast reliability lint lint-js bench docs docs-pages screenshots clean

help: ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

install: $(STAMP) ## create .venv and install the package (with psycopg) and its test and lint tools

run: $(STAMP) ## migrate the default SQLite database, run the demo, which prints the event feed
	$(BIN)/session-journal db upgrade
	$(BIN)/session-journal demo

test: $(STAMP) test-js ## run the whole suite on SQLite and PostgreSQL (the page's JavaScript first)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The operator page's pure modules under Node's own test runner (no npm package needed), before
# pytest so that pytest's summary stays the run's last line. Without `node` the tests are skipped
# with a message, as the browser tests are without Chromium; in CI (`CI` set) that fails instead.
test-js: ## the operator page's JavaScript unit tests (node --test tests/js/)
	@if command -v node >/dev/null; then node --test --test-reporter=spec tests/js/; \
	elif [ -n "$$CI" ]; then echo "node is missing: CI runs the page's JavaScript tests" >&2; exit 1; \
	else echo "node is missing: the page's JavaScript tests are skipped (CI runs them)"; fi

# Without PostgreSQL: `make test PYTEST_ARGS='-m sqlite'` (every test that needs no server, unit
# tests included); `-m postgresql` is the PostgreSQL half only. A second -m replaces the
# first, so a fast run on one backend is `.venv/bin/python -m pytest -m 'sqlite and not slow and
# not reliability'`.
test-fast: $(STAMP) test-js ## the suite without the slow and reliability tests, for edit-test loops
	$(BIN)/python -m pytest -m "not slow and not reliability" $(PYTEST_ARGS)

# `make test` runs the reliability scenarios for a few rounds; this runs only them, longer.
RELIABILITY_ROUNDS ?= 25
reliability: $(STAMP) ## longer reliability loops (kill -9, races, hostile input) on both backends
	SESSION_JOURNAL_RELIABILITY_ROUNDS=$(RELIABILITY_ROUNDS) $(BIN)/python -m pytest -m reliability $(PYTEST_ARGS)

lint: $(STAMP) lint-js ## ruff, mypy --strict and ESLint
	$(BIN)/ruff check src tests benchmarks alembic tools
	$(BIN)/ruff format --check src tests benchmarks alembic tools
	$(BIN)/mypy --strict src tests/fakes.py tests/unit/test_service_*.py

$(NODE_STAMP): package-lock.json
	npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

lint-js: $(NODE_STAMP) ## ESLint on the operator page's JavaScript and its tests (needs Node and npm)
	npx --no-install eslint src/session_journal/web/page tests/js

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,dev,postgresql,web,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) ## throughput against the bare drivers and eventsourcing, on SQLite and PostgreSQL
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/group_commit.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/follow.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/async_api.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/versus_eventsourcing.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/lone_append.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/rate_index.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/consumers.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/typed_page.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/type_filter.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/legacy_migration.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/projection.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/journal.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/retention.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/web.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/page.py $(BENCH_ARGS)

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,dev,postgresql,web,docs]'
	touch $(DOCS_STAMP)

# The site: docs/ and mkdocs.yml; --strict fails on a broken link or reference. `.ci/run` runs it.
docs: $(DOCS_STAMP) ## build the documentation site into site/ (mkdocs build --strict)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The browser tests write a PNG of each view there (they need Debian's chromium and
# chromium-driver, which .ci/run installs); CI compares no pixels.
screenshots: $(STAMP) ## the operator page's screenshots in docs/img/operator-page (headless Chromium)
	SESSION_JOURNAL_SCREENSHOTS=docs/img/operator-page $(BIN)/python -m pytest -q -m sqlite tests/web/test_operator_page.py

docs-pages: $(STAMP) ## write the generated docs pages again (docs/api/events.md, from the models)
	$(BIN)/python tools/api_event_page.py

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site node_modules
