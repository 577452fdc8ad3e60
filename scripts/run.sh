#!/usr/bin/env bash
# `make run`: migrate, make sure a local staff user and demo jobs exist, then
# run the web server and the dispatcher side by side. Ctrl-C stops both.
# HOST (127.0.0.1) and PORT (8000) choose the web server's address.
# Where to log in is printed last, once both are up (docs/OPERATIONS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
$PY manage.py migrate --no-input --verbosity 0
# Its lines (the one-time password among them) are printed at the end.
bootstrap=$($PY manage.py bootstrap_demo)
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
# Wait (up to 15 s) until the web server answers, so that nothing it prints at start comes after the summary.
probe=$HOST; [[ "$probe" == "0.0.0.0" || "$probe" == "::" ]] && probe=127.0.0.1
for _ in $(seq 75); do
    (exec 3<>"/dev/tcp/${probe//[\[\]]/}/$PORT") 2>/dev/null && break
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 0.2
done
url="http://$HOST:$PORT"
[[ "$HOST" == *:* && "$HOST" != \[* ]] && url="http://[$HOST]:$PORT"
cat <<SUMMARY

────────────────────────────────────────────────────────────────────────
  Admin      $url/admin/
  Dashboard  $url/admin/scheduler_app/dashboard/
  API docs   $url/api/docs/
${bootstrap:+$(sed 's/^/  /' <<<"$bootstrap")
}  The console shows the dispatcher's summary a minute, retries and failures;
  each job's own log lines are on its page.  Ctrl-C stops both.
────────────────────────────────────────────────────────────────────────
SUMMARY
wait -n "${pids[@]}" || true
