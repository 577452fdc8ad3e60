#!/usr/bin/env bash
# `make test`: the linter, then the suite on SQLite and on PostgreSQL (when one
# is reachable), the two passes at once. PostgreSQL comes from DATABASE_URL
# (postgres://...) or the local server at 127.0.0.1:5432 as user postgres.
# REQUIRE_POSTGRES=1 makes its absence fail. SCHEDULER_TEST_DBS=sqlite (or
# postgres) runs that pass alone.
#
# Without arguments (make test, CI): `ruff check` and `ruff format --check`,
# then each pass on TEST_WORKERS pytest-xdist workers (3 by default), every
# worker on a database of its own: test-artifacts/test-db-<pid>.sqlite3_gw<N>,
# and on PostgreSQL test_<DATABASE_URL's database>_<pid>_gw<N>
# (test_scheduler_<pid>_gw<N> by default), made and dropped by the run.
# With arguments (a file, -k EXPR, --lf ...) they go to pytest, one process a
# pass and no linter: add `-n 3` to spread a large selection over workers.
# Two passes write test-artifacts/test-sqlite.log and test-postgres.log,
# printed whole when both are done; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export DJANGO_SETTINGS_MODULE=tests.settings
mkdir -p test-artifacts
# Compiled modules and pytest's rewritten asserts are kept under test-artifacts/
# (not beside the sources), also where PYTHONDONTWRITEBYTECODE is set: every
# worker, and every dispatcher process a test starts, would compile them again.
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-$PWD/test-artifacts/pycache}
unset PYTHONDONTWRITEBYTECODE
dbs=${SCHEDULER_TEST_DBS:-sqlite,postgres}
case ",$dbs," in
    *,sqlite,*|*,postgres,*) ;;
    *) echo "SCHEDULER_TEST_DBS must be sqlite, postgres or sqlite,postgres (not '$dbs')." >&2; exit 2 ;;
esac

status=0
if [ $# -eq 0 ]; then
    echo "== ruff check, ruff format --check =="
    .venv/bin/ruff check --quiet . || status=1
    .venv/bin/ruff format --check --quiet . || {
        status=1; echo "Not formatted as ruff formats it: scripts/format.sh rewrites it." >&2; }
fi

$PY manage.py makemigrations --check --dry-run >/dev/null || {
    echo "Model changes without a migration: run manage.py makemigrations." >&2; exit 1; }

pg_url=""
if [[ ",$dbs," != *,postgres,* ]]; then
    :
elif [[ "${DATABASE_URL:-}" == postgres* ]]; then
    pg_url=$DATABASE_URL
else
    candidate=postgres://postgres@127.0.0.1:5432/scheduler
    if $PY - "$candidate" <<'PYEOF' 2>/dev/null
import sys, psycopg
url = sys.argv[1].rsplit("/", 1)[0] + "/postgres"
psycopg.connect(url, connect_timeout=3).close()
PYEOF
    then pg_url=$candidate; fi
fi

# The whole suite: spread over workers, the tests marked slow handed out
# first (tests/conftest.py) so that none of them is left for the end;
# tests/api/test_scale.py's seeded module is one group, on one worker.
if [ $# -eq 0 ]; then
    set -- -n "${TEST_WORKERS:-3}" --dist loadgroup
fi

passes=()
[[ ",$dbs," == *,sqlite,* ]] && passes+=(sqlite)
if [[ ",$dbs," != *,postgres,* ]]; then
    :
elif [ -n "$pg_url" ]; then
    passes+=(postgres)
elif [ "${REQUIRE_POSTGRES:-0}" = "1" ]; then
    echo "PostgreSQL is required (REQUIRE_POSTGRES=1) but none is reachable at DATABASE_URL or 127.0.0.1:5432." >&2
    status=1
fi

run_pass() {
    if [ "$1" = sqlite ]; then
        echo "== SQLite =="
        env -u DATABASE_URL $PY -m pytest "${@:2}"
    else
        echo "== PostgreSQL ($pg_url) =="
        DATABASE_URL=$pg_url $PY -m pytest "${@:2}"
    fi
}

if [ ${#passes[@]} -eq 1 ]; then
    run_pass "${passes[0]}" "$@" || { rc=$?; [ $status -eq 0 ] && status=$rc; }
elif [ ${#passes[@]} -eq 2 ]; then
    echo "Running the SQLite and PostgreSQL passes at once (output: test-artifacts/test-sqlite.log, test-postgres.log)."
    # Each pass in a process group of its own (job control), where SIGINT is
    # not ignored: an interrupt reaches pytest, which drops its test databases.
    set -m
    run_pass sqlite "$@" >test-artifacts/test-sqlite.log 2>&1 &
    sqlite_pid=$!
    run_pass postgres "$@" >test-artifacts/test-postgres.log 2>&1 &
    postgres_pid=$!
    set +m
    trap 'kill -INT -- -$sqlite_pid -$postgres_pid 2>/dev/null; wait; exit 130' INT TERM
    wait $sqlite_pid || { rc=$?; [ $status -eq 0 ] && status=$rc; }
    wait $postgres_pid || { rc=$?; [ $status -eq 0 ] && status=$rc; }
    cat test-artifacts/test-sqlite.log test-artifacts/test-postgres.log
fi

if [[ ",$dbs," != *,postgres,* ]]; then
    echo "SCHEDULER_TEST_DBS=$dbs: the PostgreSQL pass is left out."
elif [ -z "$pg_url" ] && [ "${REQUIRE_POSTGRES:-0}" != "1" ]; then
    echo "PostgreSQL not reachable (DATABASE_URL unset, nothing at 127.0.0.1:5432): ran on SQLite only."
fi
exit $status
