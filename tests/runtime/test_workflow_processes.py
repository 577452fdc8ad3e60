"""Workflows' callbacks run exactly once while several dispatcher processes race to end their last jobs.

Real ``rundispatcher`` processes on the test database (SQLite and
PostgreSQL): each workflow is a group whose members all become due at
once, so the last of them end at about the same time in different
processes; the transaction that ends a workflow's last job takes its row's
lock and sets ``callbacks_enqueued_at`` by compare-and-set.
"""

import os
import signal

import pytest
from django.db import transaction
from django.db.models import Count

from scheduler_app.models import Job, Worker, Workflow
from scheduler_app.workflows import group, step
from tests.plumbing import log_tail, start_dispatcher, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ADD = "tests.testapp.tasks.add"
BOOM = "tests.testapp.tasks.boom"
STAMP = "tests.testapp.tasks.stamp"
WORKFLOWS = 30
MEMBERS = 8


def stamps(marker_dir):
    """Return ``{name: runs}`` of the ``stamp`` task's marker files."""
    found = {}
    for name in os.listdir(marker_dir):
        if not name.endswith(".tmp"):
            key = name.rsplit("-", 1)[0]
            found[key] = found.get(key, 0) + 1
    return found


def test_callbacks_run_once_with_dispatcher_processes_racing_to_end_the_last_jobs(marker_dir, tmp_path):
    logs = [tmp_path / f"d{i}.log" for i in range(3)]
    processes = [start_dispatcher("--concurrency", "4", "--poll-interval", "0.2", log_path=log) for log in logs]
    made = []
    expected = {}
    try:
        # Every dispatcher is up before the first job is due, so the first one
        # to start cannot end them all before the others have begun.
        pids = [p.pid for p in processes]
        up = wait_for(lambda: Worker.objects.filter(pid__in=pids, state="alive").count() == 3, timeout=60)
        assert up, [log_tail(log) for log in logs]
        with transaction.atomic():  # all due at once: the dispatchers race for them
            for n in range(WORKFLOWS):
                failing = n % 3 == 0  # a third of them fail: on_failure, not on_success
                last = step(BOOM).using(max_attempts=1) if failing else step(ADD, 0, 0)
                members = [step(ADD, i, n) for i in range(MEMBERS - 1)] + [last]
                callbacks = {
                    name: step(STAMP, marker_dir, f"{name}{n}") for name in ("on_success", "on_failure", "on_finish")
                }
                made.append((group(*members).enqueue(name=f"race-{n}", **callbacks), failing))
        for n, (_, failing) in enumerate(made):
            expected[f"on_finish{n}"] = 1
            expected[f"on_failure{n}" if failing else f"on_success{n}"] = 1
        done = wait_for(lambda: sum(stamps(marker_dir).values()) >= len(expected), timeout=180)
        assert done, [log_tail(log) for log in logs]
        # Callbacks are enqueued by the transaction that ends a workflow: once
        # none is active, none can come (a second one would be here by now).
        assert wait_for(lambda: not Job.objects.filter(status__in=["pending", "waiting", "running"]).exists(), 60)
    finally:
        for p in processes:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = [p.wait(60) for p in processes]
    assert codes == [0, 0, 0], [log_tail(log) for log in logs]
    assert stamps(marker_dir) == expected
    for workflow, failing in made:
        workflow.refresh_from_db()
        assert workflow.status == ("failed" if failing else "succeeded")
        assert workflow.callbacks_enqueued_at is not None
        assert len(workflow.callbacks["enqueued"]) == 2
    callback_jobs = Job.objects.filter(task=STAMP).values("workflow").annotate(n=Count("pk")).order_by()
    assert {row["n"] for row in callback_jobs} == {2} and len(callback_jobs) == WORKFLOWS
    # More than one dispatcher ended jobs of the same workflows.
    assert Job.objects.exclude(task=STAMP).order_by().values("worker").distinct().count() > 1
    assert Workflow.objects.count() == WORKFLOWS
