#!/usr/bin/env bash
# `make run`: migrate, make sure a local staff user and demo jobs exist, then
# run the web server and the dispatcher side by side. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
$PY manage.py migrate --no-input
$PY manage.py bootstrap_demo
pids=()
stop() {
    trap - INT TERM EXIT
    echo "Stopping (running jobs get the dispatcher's grace period)..."
    # Each child leads its own process group (setsid), so the terminal's Ctrl-C
    # reaches only this script; the children get exactly one SIGTERM from here.
    for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap stop INT TERM EXIT
setsid $PY manage.py runserver "$HOST:$PORT" &
pids+=($!)
setsid $PY manage.py rundispatcher &
pids+=($!)
echo "Admin: http://$HOST:$PORT/admin/  Dashboard: http://$HOST:$PORT/admin/scheduler_app/dashboard/  API: http://$HOST:$PORT/api/docs/  (Ctrl-C stops)"
wait -n "${pids[@]}" || true
