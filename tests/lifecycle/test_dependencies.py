"""Job dependencies (lifecycle.dependencies): waiting, settling, cascades, cycles, retries, races.

On SQLite and PostgreSQL; the race between making a dependent and finishing
its dependency runs on PostgreSQL, where the two really overlap.
"""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import OperationalError
from django.utils import timezone

from scheduler_app import enqueue, lifecycle
from scheduler_app.models import Job, JobDependency
from scheduler_app.testing import drain
from scheduler_app.vocabulary.jobs import Outcome
from tests.plumbing import at_once, claim

pytestmark = pytest.mark.django_db

ADD = "tests.testapp.tasks.add"
BOOM = "tests.testapp.tasks.boom"
NONE_LEFT = {"succeeded": 0, "failed": 0, "cancelled": 0, "snoozed": 0}


def make(*depends_on, task=ADD, args=(1, 2), **options):
    job, created = enqueue(task, list(args), depends_on=list(depends_on), **options)
    assert created
    return job


def status(job):
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def run(job, outcome_status="succeeded", worker="w"):
    """Claim ``job`` (alone) and finish it with ``outcome_status``, as a dispatcher does."""
    [claimed] = claim(worker, queues=[job.queue], limit=1, lease=30, ids=[job.pk])
    result = "3" if outcome_status == "succeeded" else None
    error = None if outcome_status != "failed" else {"attempt": 1, "message": "no"}
    lifecycle.finish([Outcome(claimed.id, worker, claimed.attempt, outcome_status, result_json=result, error=error)])


def test_a_job_waits_until_every_dependency_succeeded():
    a, b = make(), make()
    c = make(a.pk, b)  # an id or a Job
    assert (c.status, c.dependencies_left, c.has_dependencies) == ("waiting", 2, True)
    assert Job.objects.get(pk=a.pk).has_dependents
    # Not claimable while waiting.
    assert [j.id for j in claim("w", queues=["default"], limit=10, lease=30)] == [a.pk, b.pk]
    lifecycle.finish([Outcome(a.pk, "w", 1, "succeeded", result_json="3")])
    assert (status(c), Job.objects.get(pk=c.pk).dependencies_left) == ("waiting", 1)
    lifecycle.finish([Outcome(b.pk, "w", 1, "succeeded", result_json="3")])
    assert status(c) == "pending"
    assert Job.objects.get(pk=c.pk).errors == []


def test_a_failed_dependency_cancels_the_chain_with_a_reason_naming_it():
    a = make(task=BOOM, args=["x"], max_attempts=1)
    b = make(a.pk)
    c = make(b.pk)
    anyway = make(b.pk, on_dependency_failure="run")
    run(a, "failed")
    b.refresh_from_db()
    c.refresh_from_db()
    assert (b.status, c.status, status(anyway)) == ("cancelled", "cancelled", "pending")
    assert b.errors[-1]["message"] == f"Cancelled: job {a.pk} failed and this job depends on it."
    assert b.errors[-1]["exception_class"] == "scheduler_app.lifecycle.DependencyFailed"
    assert c.errors[-1]["message"] == f"Cancelled: job {b.pk} was cancelled and this job depends on it."
    assert b.finished_at is not None and b.attempts == 0


def test_a_retry_that_remains_is_not_an_end():
    a = make(task=BOOM, args=["x"], max_attempts=2)
    b = make(a.pk)
    [claimed] = claim("w", queues=["default"], limit=1, lease=30, ids=[a.pk])
    # A failed attempt with one left: pending again, not an end.
    lifecycle.finish([Outcome(a.pk, "w", claimed.attempt, "pending", error={"m": 1}, retry_at=timezone.now())])
    assert (status(a), status(b)) == ("pending", "waiting")


def test_cancelling_a_dependency_cancels_its_dependents():
    a = make(execute_at=timezone.now() + timedelta(hours=1))
    b = make(a.pk)
    assert lifecycle.cancel(a.pk) == "cancelled"
    assert status(b) == "cancelled"
    # A waiting job can be cancelled too, and its own dependents follow.
    c, d = make(), None
    d = make(c.pk)
    e = make(d.pk, on_dependency_failure="run")
    assert lifecycle.cancel(d.pk) == "cancelled"
    assert (status(d), status(e)) == ("cancelled", "pending")
    assert lifecycle.cancel_many([c.pk]) == (1, 0, 0)


def test_a_dependency_that_already_ended_decides_at_creation():
    done = make()
    run(done)
    failed = make(task=BOOM, args=["x"], max_attempts=1)
    run(failed, "failed")
    assert make(done.pk).status == "pending"
    born_cancelled = make(done.pk, failed.pk)
    assert born_cancelled.status == "cancelled"
    assert born_cancelled.errors[0]["message"] == f"Cancelled: job {failed.pk} failed and this job depends on it."
    assert make(failed.pk, on_dependency_failure="run").status == "pending"


def test_unknown_ids_and_bad_values_are_refused_with_nothing_made():
    a = make()
    with pytest.raises(ValidationError) as caught:
        enqueue(ADD, [1, 2], depends_on=[a.pk, 99999999])
    assert caught.value.message_dict == {"depends_on": ["No job has the id 99999999."]}
    with pytest.raises(ValidationError) as caught:
        enqueue(ADD, [1, 2], depends_on=["x"], on_dependency_failure="maybe")
    assert caught.value.message_dict == {
        "depends_on": ["Must be a list of at most 1000 job ids."],
        "on_dependency_failure": ['Must be "cancel" or "run".'],
    }
    assert Job.objects.count() == 1 and not Job.objects.get(pk=a.pk).has_dependents


def test_bulk_jobs_depend_on_each_other_by_index_in_any_order():
    outside = make()
    jobs = lifecycle.enqueue_many(
        [
            {"task": ADD, "args": [1, 1], "depends_on_index": [2]},
            {"task": ADD, "args": [2, 2]},
            {"task": ADD, "args": [3, 3], "depends_on_index": [1], "depends_on": [outside.pk]},
        ]
    )
    assert [j.status for j in jobs] == ["waiting", "pending", "waiting"]
    assert set(JobDependency.objects.values_list("job_id", "depends_on_id")) == {
        (jobs[0].pk, jobs[2].pk),
        (jobs[2].pk, jobs[1].pk),
        (jobs[2].pk, outside.pk),
    }
    assert drain() == {**NONE_LEFT, "succeeded": 4}


def test_bulk_cycles_self_references_and_strangers_are_refused():
    cases = [
        ([[1], [0]], {0: {"depends_on_index": ["Jobs 0 -> 1 -> 0 of this request depend on each other in a cycle."]}}),
        ([[0]], {0: {"depends_on_index": ["A job cannot depend on itself."]}}),
        ([[], [5]], {1: {"depends_on_index": ["No job 5 in this request (indexes 0 to 1)."]}}),
        ([[], [1, 2], [1]], {1: {"depends_on_index": ["A job cannot depend on itself."]}}),
    ]
    for links, errors in cases:
        with pytest.raises(lifecycle.BulkValidationError) as caught:
            lifecycle.enqueue_many([{"task": ADD, "args": [i, i], "depends_on_index": d} for i, d in enumerate(links)])
        assert caught.value.by_index == errors
    with pytest.raises(lifecycle.BulkValidationError) as caught:
        lifecycle.enqueue_many([{"task": ADD, "args": [1, 1]}, {"task": ADD, "args": [2, 2], "depends_on": [424242]}])
    assert caught.value.by_index == {1: {"depends_on": ["No job has the id 424242."]}}
    assert Job.objects.count() == 0


def test_a_bulk_job_whose_dependency_is_cancelled_at_birth_names_it():
    failed = make(task=BOOM, args=["x"], max_attempts=1)
    run(failed, "failed")
    first, second = lifecycle.enqueue_many(
        [
            {"task": ADD, "args": [1, 1], "depends_on": [failed.pk]},
            {"task": ADD, "args": [2, 2], "depends_on_index": [0]},
        ]
    )
    second.refresh_from_db()
    assert (first.status, second.status) == ("cancelled", "cancelled")
    assert second.errors[0]["message"] == f"Cancelled: job {first.pk} was cancelled and this job depends on it."


def test_drain_runs_dependents_once_their_dependencies_succeeded():
    a = make(args=(1, 1))
    b = make(a.pk, args=(2, 2))
    make(b.pk, args=(3, 3))
    assert drain() == {**NONE_LEFT, "succeeded": 3}
    assert list(Job.objects.order_by("started_at").values_list("args", flat=True)) == [[1, 1], [2, 2], [3, 3]]


def test_retry_waits_again_or_is_refused_while_a_dependency_failed():
    a = make(execute_at=timezone.now() + timedelta(hours=1))
    b = make(a.pk)
    lifecycle.cancel(b.pk)
    retried = lifecycle.retry(b.pk)
    assert (retried.status, retried.dependencies_left) == ("waiting", 1)
    lifecycle.cancel(a.pk)  # b is cancelled again
    with pytest.raises(lifecycle.InvalidTransition) as caught:
        lifecycle.retry(b.pk)
    assert (
        str(caught.value)
        == f"Cannot retry job {b.pk}: job {a.pk}, which it depends on, is cancelled; retry that one first."
    )
    lifecycle.retry(a.pk, run_now=True)  # its time is an hour ahead: "now" runs it now
    assert lifecycle.retry(b.pk).status == "waiting"
    assert drain() == {**NONE_LEFT, "succeeded": 2}


def test_waiting_jobs_are_active_for_their_unique_key_and_can_be_rescheduled():
    a = make(execute_at=timezone.now() + timedelta(hours=1))
    b = make(a.pk, unique_key="only-one")
    again, created = enqueue(ADD, [5, 5], unique_key="only-one")
    assert (again.pk, created) == (b.pk, False)
    moved = lifecycle.reschedule(b.pk, priority=50)
    assert (moved.status, moved.priority) == ("waiting", 50)


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_making_a_dependent_while_its_dependency_finishes_never_strands_it():
    """Whichever of the two commits second sees the other: never a waiting job whose dependency succeeded."""
    stranded = []
    for _ in range(25):
        dependency = make()
        [claimed] = claim("w", queues=["default"], limit=1, lease=30, ids=[dependency.pk])
        made = race(
            lambda dependency=dependency: make(dependency.pk),
            lambda claimed=claimed: lifecycle.finish(
                [Outcome(claimed.id, "w", claimed.attempt, "succeeded", result_json="3")]
            ),
        )
        if status(made) != "pending":
            stranded.append(made.pk)
    assert stranded == []


def race(first, second):
    """Run two functions at the same moment on two threads (each with its own connection); return the first's result."""
    return at_once(first, second)[0]


def test_a_waiting_job_is_ready_for_django_tasks():
    from django.tasks import TaskResultStatus

    from tests.testapp import tasks

    blocker = make(execute_at=timezone.now() + timedelta(hours=1))
    waiting = make(blocker.pk)
    assert tasks.add.get_result(str(waiting.pk)).status == TaskResultStatus.READY


def test_the_finish_and_the_settling_of_dependents_are_one_transaction(monkeypatch):
    from scheduler_app import sql

    a = make()
    b = make(a.pk)
    [claimed] = claim("w", queues=["default"], limit=1, lease=30, ids=[a.pk])

    def broken(*args, **kwargs):
        raise OperationalError("the database went away between the two statements")

    monkeypatch.setattr(sql, "settle_dependents", broken)
    with pytest.raises(OperationalError):
        lifecycle.finish([Outcome(claimed.id, "w", claimed.attempt, "succeeded", result_json="3")])
    # Neither happened: the dependency still runs, the dependent still waits.
    assert (status(a), status(b)) == ("running", "waiting")
    monkeypatch.undo()
    lifecycle.finish([Outcome(claimed.id, "w", claimed.attempt, "succeeded", result_json="3")])
    assert (status(a), status(b)) == ("succeeded", "pending")
