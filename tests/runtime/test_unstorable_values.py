"""A task's outcome may hold values no database stores as they are; none of them jams anything (invariant 13).

Run on both databases: PostgreSQL refuses NUL (in text and JSON) and lone
surrogates, SQLite's driver cannot encode lone surrogates, and a
``smallint`` stops at 32767.
"""

import dataclasses

import pytest
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.lifecycle import finishing
from scheduler_app.models import Job, JobLog
from scheduler_app.vocabulary.jobs import Outcome, Status
from scheduler_app.vocabulary.policy import UNSTORABLE_CLASS
from tests import plumbing
from tests.plumbing import dispatcher_thread, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

T = "tests.testapp.tasks."
QUEUES = ["default", "slow", "other"]
FFFD = "\ufffd"


def enqueue(task, *args, **kw):
    return lifecycle.enqueue(T + task, list(args), **kw)[0]


def test_values_no_database_stores_are_stored_cleaned_and_nothing_else_waits():
    jobs = {
        name: enqueue(name, max_attempts=1)
        for name in ("returns_nul", "raises_surrogate", "logs_badly", "progress_nul", "noop")
    }
    with dispatcher_thread():
        assert wait_for(lambda: not Job.objects.filter(status__in=["pending", "running"]).exists(), timeout=30)
    rows = {name: Job.objects.get(pk=job.pk) for name, job in jobs.items()}
    assert {name: row.status for name, row in rows.items()} == {
        "returns_nul": "succeeded",
        "raises_surrogate": "failed",
        "logs_badly": "succeeded",
        "progress_nul": "succeeded",
        "noop": "succeeded",
    }
    assert rows["returns_nul"].result == {"text": f"a{FFFD}b", f"name{FFFD}": [f"bad file-{FFFD}.txt"]}
    (error,) = rows["raises_surrogate"].errors
    assert error["message"] == f"bad file-{FFFD}.txt{FFFD}" and FFFD in error["traceback"]
    logs = list(
        JobLog.objects.filter(job_id=jobs["logs_badly"].pk).order_by("seq").values_list("level", "logger", "message")
    )
    assert logs == [
        (32767, "tests.testapp.bad", f"level 40000 {FFFD} and {FFFD}"),
        (30, "x" * 250 + FFFD + "yyyy", "a long name with a NUL"),
    ]
    assert rows["progress_nul"].progress["message"] == f"half {FFFD} {FFFD}"


@pytest.fixture
def no_boundary(monkeypatch):
    """Let values through the boundary as they are: what a value it does not foresee would do."""
    monkeypatch.setattr(finishing.storable, "clean_json_text", lambda text: text)


def claim(count, **kw):
    return plumbing.claim("w", queues=QUEUES, limit=count, lease=30, **kw)


def test_a_row_the_database_refuses_fails_its_own_job_and_the_batch_is_written(no_boundary):
    bad, good, other = (enqueue("noop") for _ in range(3))
    jobs = {job.id: job for job in claim(3)}
    outcomes = [
        Outcome(job.id, "w", 1, Status.SUCCEEDED, result_json='"a\udcffb"' if job.id == bad.pk else '"fine"')
        for job in jobs.values()
    ]
    assert lifecycle.finish(outcomes) == set(jobs)
    rows = {row.pk: row for row in Job.objects.all()}
    assert rows[good.pk].status == rows[other.pk].status == "succeeded" and rows[good.pk].result == "fine"
    assert rows[bad.pk].status == "failed" and rows[bad.pk].result is None
    (error,) = rows[bad.pk].errors
    assert error["exception_class"] == UNSTORABLE_CLASS
    assert error["message"].startswith("The attempt's outcome could not be stored (succeeded): ")


def test_a_claim_that_records_a_refused_outcome_still_claims(no_boundary):
    first = enqueue("noop", max_attempts=3)
    (job,) = claim(1)
    waiting = enqueue("noop")
    refused = Outcome(
        job.id,
        "w",
        1,
        Status.PENDING,
        result_json=None,
        retry_at=timezone.now(),
        error={"attempt": 1, "message": "x", "exception_class": "E", "traceback": "", "time": "t"},
    )
    refused = dataclasses.replace(refused, status=Status.SUCCEEDED, result_json='"\udcff"')
    claimed = claim(2, finished=[refused])
    assert [j.id for j in claimed] == [waiting.pk]
    row = Job.objects.get(pk=first.pk)
    assert row.status == "failed" and row.errors[-1]["exception_class"] == UNSTORABLE_CLASS


def test_an_unstorable_outcome_does_not_jam_a_dispatcher(no_boundary, monkeypatch):
    # The boundary is off: the task's raw surrogate reaches the statement,
    # which fails; the dispatcher writes the batch row by row and goes on.
    import json

    from scheduler_app.vocabulary import storable

    monkeypatch.setattr(storable, "json_text", lambda value: '"a\udcffb"' if value == "jam" else json.dumps(value))
    bad = enqueue("add", "ja", "m")
    rest = [enqueue("add", i, 1) for i in range(5)]
    with dispatcher_thread():
        assert wait_for(lambda: not Job.objects.filter(status__in=["pending", "running"]).exists(), timeout=30)
        later = enqueue("add", 1, 1)
        assert wait_for(lambda: Job.objects.get(pk=later.pk).status == "succeeded", timeout=30)
    assert Job.objects.get(pk=bad.pk).status == "failed"
    assert all(Job.objects.get(pk=job.pk).status == "succeeded" for job in rest)
