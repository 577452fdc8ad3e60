# Two commands: `make run` and `make test`. Everything else is plumbing.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint format venv bench clean help

help:
	@echo "make run    - set up, migrate, start the web server and the dispatcher (SQLite; HOST, PORT)"
	@echo "make test   - the linter, then the whole suite on SQLite and on PostgreSQL (when one is"
	@echo "              reachable), both at once on parallel workers (SCHEDULER_TEST_DBS=sqlite make test:"
	@echo "              the SQLite pass alone; scripts/test.sh FILE or -k EXPR: a selection; docs/OPERATIONS.md)"
	@echo "make lint   - ruff check and ruff format --check (make test runs them first)"
	@echo "make format - apply ruff's safe fixes and its formatting to the whole tree"
	@echo "make bench  - benchmarks against the peers (see docs/BENCHMARKS.md)"

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@set -e; \
	if [ ! -x $(PY) ] || ! $(PY) -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then \
		python=$$(scripts/find-python); \
		echo "Creating $(VENV) with $$python"; \
		rm -rf $(VENV); "$$python" -m venv $(VENV); \
	fi; \
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip; \
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt; \
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --editable .; \
	touch $(STAMP)

run: $(STAMP)
	@scripts/run.sh

test: $(STAMP)
	@scripts/test.sh

lint: $(STAMP)
	@$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: $(STAMP)
	@scripts/format.sh

bench: $(STAMP)
	@$(PY) bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache test-artifacts
