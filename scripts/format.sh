#!/usr/bin/env bash
# `make format`: apply the linter's safe fixes, then the formatter, to the whole
# tree (the rules are in pyproject.toml). `make test` checks both and fails on
# anything this would change.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check --fix .
.venv/bin/ruff format .
