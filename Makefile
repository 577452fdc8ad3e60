# Two commands: `make run` and `make test`. Everything else is plumbing.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test venv bench clean help

help:
	@echo "make run    - set up, migrate, start the web server and the dispatcher (SQLite; HOST, PORT)"
	@echo "make test   - the whole suite on SQLite, and on PostgreSQL when one is reachable"
	@echo "              (SCHEDULER_TEST_DBS=sqlite make test: the SQLite pass alone; docs/OPERATIONS.md)"
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

bench: $(STAMP)
	@$(PY) bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache test-artifacts
