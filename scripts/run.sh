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
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap stop INT TERM EXIT
$PY manage.py runserver "$HOST:$PORT" &
pids+=($!)
if $PY manage.py help rundispatcher >/dev/null 2>&1; then
    $PY manage.py rundispatcher &
    pids+=($!)
fi
echo "Admin: http://$HOST:$PORT/admin/   API: http://$HOST:$PORT/api/   (Ctrl-C stops)"
wait -n "${pids[@]}"
