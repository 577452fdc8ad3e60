#!/usr/bin/env bash
# Profile the dispatcher's hot path with py-spy (installed in bench/.venv-peers by make bench;
# PYSPY=/path/to/py-spy uses another).
# Usage: bench/profile_dispatcher.sh [N] [SECONDS] [SLOTS]  (PostgreSQL database bench_profile)
# Writes bench/results/profile-*.txt (collapsed stacks) and prints the top frames.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}; SECS=${2:-15}; SLOTS=${3:-4}
export DATABASE_URL=postgresql://postgres@127.0.0.1:5432/bench_profile
export DJANGO_SETTINGS_MODULE=bench.settings_ours SCHEDULER_LOG_LEVEL=WARNING PYTHONPATH=$PWD
psql -q -h 127.0.0.1 -U postgres -c 'DROP DATABASE IF EXISTS bench_profile WITH (FORCE)' -c 'CREATE DATABASE bench_profile'
.venv/bin/python bench/drivers/ours.py setup >/dev/null
.venv/bin/python bench/drivers/ours.py enqueue_noop --n "$N" >/dev/null
mkdir -p bench/results
out=bench/results/profile-$(date +%H%M%S)
.venv/bin/python bench/drivers/ours_dispatch.py --concurrency "$SLOTS" >"$out.log" 2>&1 &
pid=$!
sleep 2
${PYSPY:-bench/.venv-peers/bin/py-spy} record --pid "$pid" --duration "$SECS" --rate ${PYSPY_RATE:-200} --threads --gil ${PYSPY_EXTRA:-} --format raw -o "$out.txt" >/dev/null 2>&1 || true
${PYSPY:-bench/.venv-peers/bin/py-spy} dump --pid "$pid" > "$out.dump" 2>&1 || true
kill -TERM "$pid"; wait "$pid" || true
psql -q -h 127.0.0.1 -U postgres -c "SELECT count(*) AS done FROM scheduler_app_job WHERE status='succeeded'" bench_profile
psql -q -h 127.0.0.1 -U postgres -c 'DROP DATABASE IF EXISTS bench_profile WITH (FORCE)'
.venv/bin/python bench/profile_summary.py "$out.txt"
