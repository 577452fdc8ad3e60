#!/usr/bin/env bash
# `make test`: the suite on SQLite, then on PostgreSQL when one is reachable.
# PostgreSQL comes from DATABASE_URL (postgres://...) or the local server at
# 127.0.0.1:5432 as user postgres. REQUIRE_POSTGRES=1 makes its absence fail.
# SCHEDULER_TEST_DBS=sqlite (or postgres) runs that pass alone; arguments go to pytest.
# The test databases: test-artifacts/test-db-<pid>.sqlite3, and on PostgreSQL
# test_<DATABASE_URL's database>_<pid> (test_scheduler_<pid> by default), made and dropped by the run.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export DJANGO_SETTINGS_MODULE=tests.settings
mkdir -p test-artifacts
dbs=${SCHEDULER_TEST_DBS:-sqlite,postgres}
case ",$dbs," in
    *,sqlite,*|*,postgres,*) ;;
    *) echo "SCHEDULER_TEST_DBS must be sqlite, postgres or sqlite,postgres (not '$dbs')." >&2; exit 2 ;;
esac

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

status=0
if [[ ",$dbs," == *,sqlite,* ]]; then
    echo "== SQLite =="
    env -u DATABASE_URL $PY -m pytest "$@" || status=$?
fi
if [[ ",$dbs," != *,postgres,* ]]; then
    echo "SCHEDULER_TEST_DBS=$dbs: the PostgreSQL pass is left out."
elif [ -n "$pg_url" ]; then
    echo "== PostgreSQL ($pg_url) =="
    DATABASE_URL=$pg_url $PY -m pytest "$@" || status=$?
elif [ "${REQUIRE_POSTGRES:-0}" = "1" ]; then
    echo "PostgreSQL is required (REQUIRE_POSTGRES=1) but none is reachable at DATABASE_URL or 127.0.0.1:5432." >&2
    status=1
else
    echo "PostgreSQL not reachable (DATABASE_URL unset, nothing at 127.0.0.1:5432): ran on SQLite only."
fi
exit $status
