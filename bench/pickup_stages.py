"""Where the pickup latency goes: one due-now job at a time, timed stage by stage.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_ours \
        .venv/bin/python bench/pickup_stages.py [--n 50] [--slots 4]

Starts ``rundispatcher`` as a subprocess in which the listener, the loop's
tick, the claim and the pool hand-off are wrapped to record ``time.time()``
per job (the app is not changed), then enqueues ``stamp`` jobs from this
process and prints the median time of each stage, measured from the moment
before ``task.enqueue()``:

    enqueued   the enqueue call returned (INSERT + NOTIFY + commit)
    notified   the listener thread got the NOTIFY
    tick       the loop thread began the tick that claimed the job
    sql_start  the claim statement was sent (PostgreSQL's prepared finish+claim)
    sql_end    its rows came back
    claimed    the store's claim returned (rows made into jobs)
    handed     the job was put in a worker thread's inbox
    started    the job's first statement ran (``stamp``)
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STAGES = ["enqueued", "notified", "tick", "sql_start", "sql_end", "claimed", "handed", "started"]


def dispatcher_main(out_path, argv):
    """Runs inside the dispatcher subprocess."""
    from bench.drivers.common import setup_django

    setup_django("bench.settings_ours")
    from scheduler_app.dispatcher import loop, pool
    from scheduler_app.runtime import store
    from scheduler_app.vocabulary import wakeup

    marks = {}  # job id -> {stage: time}
    state = {"tick": 0.0}

    def mark(job_id, stage, at=None):
        marks.setdefault(int(job_id), {}).setdefault(stage, at or time.time())

    decode = wakeup.WakeUp.decode

    def timed_decode(text):
        now = time.time()
        message = decode(text)
        for entry in message.jobs:  # a sync request lists none: nothing to time
            mark(entry[0], "notified", now)
        return message

    tick = loop.Dispatcher.tick

    def timed_tick(self, now):
        state["tick"] = time.time()
        return tick(self, now)

    claim = store.DjangoStore.claim

    def timed_claim(self, *args, **kwargs):
        jobs = claim(self, *args, **kwargs)
        now = time.time()
        for job in jobs:
            mark(job.id, "tick", state["tick"])
            mark(job.id, "claimed", now)
        return jobs

    submit_many = pool.WorkerPool.submit_many  # submit() calls it too

    def timed_submit_many(self, group, jobs):
        jobs = list(jobs)
        result = submit_many(self, group, jobs)
        for job in jobs:
            mark(job.id, "handed")
        return result

    from scheduler_app.sql import dialect as sql_dialect

    finish_and_claim = sql_dialect.pg_finish_and_claim  # what the PostgreSQL dialect calls

    def timed_finish_and_claim(*args, **kwargs):
        started = time.time()
        won, rows = finish_and_claim(*args, **kwargs)
        ended = time.time()
        for row in rows:
            mark(row[0], "sql_start", started)
            mark(row[0], "sql_end", ended)
        return won, rows

    sql_dialect.pg_finish_and_claim = timed_finish_and_claim
    wakeup.WakeUp.decode = staticmethod(timed_decode)
    loop.Dispatcher.tick = timed_tick
    store.DjangoStore.claim = timed_claim
    pool.WorkerPool.submit_many = timed_submit_many

    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(["manage.py", "rundispatcher", *argv])
    finally:
        with open(out_path, "w") as f:
            json.dump(marks, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--slots", type=int, default=4)
    args = parser.parse_args()

    from bench.drivers.common import create_stamp_table, setup_django, wait_stamp

    setup_django("bench.settings_ours")
    from django.core.management import call_command
    from django.db import connection

    from bench.benchapp.tasks import stamp

    call_command("migrate", verbosity=0)
    create_stamp_table()
    with connection.cursor() as c:
        c.execute("DELETE FROM bench_stamp")
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    proc = subprocess.Popen(
        [sys.executable, __file__, "--dispatcher", out, "--concurrency", str(args.slots)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(3)
        t0s = {}
        for i in range(args.n + 3):
            time.sleep(0.1)
            key = f"s{i}"
            t0 = time.time()
            result = stamp.enqueue(key=key, due=t0)
            t0s[int(result.id)] = (t0, time.time(), key)
            wait_stamp(key)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    with open(out) as f:
        marks = {int(k): v for k, v in json.load(f).items()}
    with connection.cursor() as c:
        c.execute("SELECT key, started FROM bench_stamp")
        started = dict(c.fetchall())
    rows = []
    for job_id, (t0, enqueued, key) in sorted(t0s.items())[3:]:
        m = marks.get(job_id, {})
        m.update(enqueued=enqueued, started=started.get(key))
        if all(m.get(s) is not None for s in STAGES):
            rows.append([(m[s] - t0) * 1000 for s in STAGES])
    print(f"{len(rows)} jobs; ms since the enqueue call began (median, p90)")
    print("| stage | median | p90 | step (median) |\n|---|---|---|---|")
    for i, stage in enumerate(STAGES):
        values = sorted(r[i] for r in rows)
        med = statistics.median(values)
        p90 = values[int(len(values) * 0.9) - 1]
        steps = statistics.median(r[i] - (r[i - 1] if i else 0.0) for r in rows)
        print(f"| {stage} | {med:.2f} | {p90:.2f} | {steps:.2f} |")
    os.unlink(out)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--dispatcher":
        dispatcher_main(sys.argv[2], sys.argv[3:])
    else:
        main()
