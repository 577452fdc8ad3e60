"""Workflows (scheduler_app.workflows over lifecycle.workflows): results passed along, callbacks, status, retry.

Run through ``testing.drain`` (the dispatcher's claim and finish, in this
thread), on SQLite and PostgreSQL. The race of dispatcher processes ending
a workflow's last jobs is in ``tests/runtime/test_workflow_processes.py``.
"""

import pytest
from django.core.exceptions import ValidationError

from scheduler_app import enqueue, lifecycle
from scheduler_app.lifecycle import enqueue_many
from scheduler_app.lifecycle.workflows import derive_status, members
from scheduler_app.models import Job, JobStatus
from scheduler_app.testing import drain
from scheduler_app.workflows import Workflow, chain, chord, group, step
from tests.plumbing import claim
from tests.testapp.tasks import add, boom, double, echo, noop, total, workflow_seen

pytestmark = pytest.mark.django_db

ECHO = "tests.testapp.tasks.echo"


def results(workflow):
    workflow.refresh_from_db()  # the callbacks' jobs it lists are left out
    return [j.result for j in members(workflow).order_by("pk")]


def job_of(workflow, index):
    return members(workflow).order_by("pk")[index]


def callback_jobs(workflow):
    workflow.refresh_from_db()
    return {e["callback"]: Job.objects.get(pk=e["job"]) for e in workflow.callbacks.get("enqueued", [])}


def test_a_chain_passes_each_result_to_the_next_step_first():
    wf = chain(step(add, 1, 2), step(add, 10), step(double)).enqueue(name="sums")
    assert wf.pk and wf.name == "sums" and wf.status == "pending"
    assert drain() == {"succeeded": 3, "failed": 0, "cancelled": 0, "snoozed": 0}
    assert results(wf) == [3, 13, 26]
    assert list(wf.results.values()) == [3, 13, 26] and list(wf.results) == [j.pk for j in members(wf).order_by("pk")]
    wf.refresh_from_db()
    assert wf.status == "succeeded" and wf.finished_at is not None


def test_a_group_in_a_chain_gives_the_next_step_the_list_in_group_order():
    wf = chain(step(add, 1, 1), group(step(double), step(add, 5), step(echo)), step(echo)).enqueue()
    drain()
    assert results(wf) == [2, 4, 7, [2], [[4, 7, [2]]]]  # echo returns its arguments: the list is one


def test_a_chord_runs_its_body_with_the_members_results():
    wf = chord(group(step(add, 1, 2), step(add, 3, 4), step(add, 5, 6)), step(total, extra=100)).enqueue()
    drain()
    assert results(wf) == [3, 7, 11, 121]


def test_nested_chains_groups_and_chords():
    inner = chain(step(add, 1, 1), step(double))  # 4
    canvas = chain(
        chord([inner, group(step(add, 2, 3), chain(step(add, 0, 1), step(double)))], step(echo)),  # [4, 5, 2]
        step(echo, "tail"),
    )
    wf = canvas.enqueue()
    drain()
    assert results(wf)[-2:] == [[[4, 5, 2]], [[[4, 5, 2]], "tail"]]
    wf.refresh_from_db()
    assert wf.status == "succeeded"


def test_an_immutable_step_receives_nothing():
    wf = chain(step(add, 1, 2), step(echo, "alone").immutable()).enqueue()
    drain()
    assert results(wf) == [3, ["alone"]]


def test_depends_on_with_pass_results_on_plain_enqueue():
    a, _ = enqueue(add, [1, 2])
    b, _ = enqueue(add, [3, 4])
    one, _ = enqueue(ECHO, ["x"], depends_on=[a], pass_results=True)
    two, _ = enqueue(ECHO, [], depends_on=[b, a], pass_results=True)
    plain, _ = enqueue(ECHO, [], depends_on=[a])
    drain()
    got = {j.pk: j.result for j in Job.objects.filter(pk__in=[one.pk, two.pk, plain.pk])}
    assert got == {one.pk: [3, "x"], two.pk: [[7, 3]], plain.pk: []}


def test_pass_results_to_a_job_whose_dependencies_already_succeeded():
    a, _ = enqueue(add, [2, 2])
    drain()
    b, _ = enqueue(ECHO, [], depends_on=[a], pass_results=True)
    assert b.args == [4]
    drain()
    assert Job.objects.get(pk=b.pk).result == [4]


def test_pass_results_checks_the_signature_with_the_result():
    with pytest.raises(ValidationError) as caught:
        enqueue(add, [1, 2], depends_on=[enqueue(noop)[0]], pass_results=True)
    assert "args" in caught.value.message_dict
    with pytest.raises(ValidationError) as caught:
        enqueue(add, [1], pass_results="yes")
    assert caught.value.message_dict["pass_results"] == ["Must be true or false."]


def test_a_job_cancelled_while_waiting_gets_the_results_when_retried():
    a, _ = enqueue(add, [1, 2])
    b, _ = enqueue(ECHO, [], depends_on=[a], pass_results=True)
    lifecycle.cancel(b.pk)
    drain()
    lifecycle.retry(b.pk)
    drain()
    assert Job.objects.get(pk=b.pk).result == [3]


def test_the_block_collects_jobs_from_every_api_and_runs_callbacks_once(marker_dir):
    with Workflow(
        name="block", on_success=step(echo, "ok"), on_finish=step(echo, "done"), on_failure=step(echo, "bad")
    ) as wf:
        first = add.enqueue(1, 2)
        second, _ = enqueue(noop)
        [third] = enqueue_many([{"task": "tests.testapp.tasks.noop"}])
        assert chain(step(add, 5, 5), step(double)).enqueue() == wf
    ids = set(members(wf).values_list("pk", flat=True))
    assert {int(first.id), second.pk, third.pk} <= ids and len(ids) == 5
    assert drain() == {"succeeded": 7, "failed": 0, "cancelled": 0, "snoozed": 0}
    callbacks = callback_jobs(wf)
    assert sorted(callbacks) == ["on_finish", "on_success"]
    assert callbacks["on_success"].result == ["ok"] and callbacks["on_finish"].result == ["done"]
    wf.refresh_from_db()
    assert wf.status == "succeeded" and wf.callbacks_enqueued_at is not None
    assert members(wf).count() == 5  # the callbacks' jobs are not among those it is derived from
    assert drain()["succeeded"] == 0


def test_a_failure_cancels_the_chord_body_fails_the_workflow_and_runs_on_failure():
    body = step(total)
    wf = chord(group(step(add, 1, 2), step(boom, "no")), body).enqueue(
        on_success=step(echo, "ok"), on_failure=step(echo, "bad"), on_finish=step(echo, "done")
    )
    Job.objects.filter(workflow=wf).update(max_attempts=1)
    summary = drain()
    assert summary == {"succeeded": 3, "failed": 1, "cancelled": 1, "snoozed": 0}  # the body counts, cancelled
    body_job = job_of(wf, 2)
    assert body_job.status == "cancelled" and body_job.result is None
    assert "failed and this job depends on it" in body_job.errors[-1]["message"]
    assert sorted(callback_jobs(wf)) == ["on_failure", "on_finish"]
    wf.refresh_from_db()
    assert wf.status == "failed"


def test_cancelling_a_workflow_cancels_its_jobs_and_runs_on_failure():
    wf = chain(step(add, 1, 2), step(double)).enqueue(on_failure=step(echo, "bad"))
    lifecycle.cancel_workflow(wf.pk)
    wf.refresh_from_db()
    assert wf.status == "cancelled"
    assert set(members(wf).values_list("status", flat=True)) == {"cancelled"}
    assert list(callback_jobs(wf)) == ["on_failure"]


def test_retrying_a_workflow_revives_the_dependents_a_failure_cancelled():
    wf = chain(step(add, 1, 2), step(boom, "first").immutable(), step(echo), step(echo)).enqueue(
        on_finish=step(echo, "done")
    )
    Job.objects.filter(workflow=wf).update(max_attempts=1)
    assert drain() == {"succeeded": 2, "failed": 1, "cancelled": 2, "snoozed": 0}
    failing = job_of(wf, 1)
    # The failing step now names a task that works: retried, it passes its result on.
    Job.objects.filter(pk=failing.pk).update(task="tests.testapp.tasks.echo")
    wf = lifecycle.retry_workflow(wf.pk)
    assert wf.status == "running" and wf.callbacks_enqueued_at is None
    statuses = list(members(wf).order_by("pk").values_list("status", flat=True))
    assert statuses == ["succeeded", "pending", "waiting", "waiting"]
    third = job_of(wf, 2)
    assert third.errors[-1]["message"].startswith("Cancelled: job")  # what happened is kept
    assert drain()["succeeded"] == 4  # three steps and on_finish again
    assert results(wf)[1:] == [["first"], [["first"]], [[["first"]]]]
    wf.refresh_from_db()
    assert wf.status == "succeeded"


def test_a_retried_workflow_runs_its_callbacks_again_and_leaves_the_earlier_ones_as_they_ended():
    """What docs/WORKFLOWS.md says of a retry: the callbacks of the new ending run as new jobs; the old stay."""
    wf = chain(step(boom, "first"), step(echo)).enqueue(
        on_success=step(echo, "ok"), on_failure=step(boom, "alert").using(max_attempts=1), on_finish=step(echo, "done")
    )
    Job.objects.filter(workflow=wf).update(max_attempts=1)
    drain()
    first_round = callback_jobs(wf)
    assert {name: job.status for name, job in first_round.items()} == {"on_failure": "failed", "on_finish": "succeeded"}
    Job.objects.filter(pk=job_of(wf, 0).pk).update(task=ECHO)  # the failing step works now
    wf = lifecycle.retry_workflow(wf.pk)
    assert wf.callbacks_enqueued_at is None
    drain()
    wf.refresh_from_db()
    assert wf.status == "succeeded"  # the failed on_failure job of the first ending is not one of its jobs
    entries = [(e["callback"], Job.objects.get(pk=e["job"])) for e in wf.callbacks["enqueued"]]
    assert [(name, job.status) for name, job in entries] == [
        ("on_failure", "failed"),
        ("on_finish", "succeeded"),  # the first ending's, not retried
        ("on_success", "succeeded"),
        ("on_finish", "succeeded"),  # the second's: on_finish ran again
    ]
    assert entries[1][1].pk != entries[3][1].pk and entries[3][1].result == ["done"]


def test_a_chord_body_that_runs_anyway_gets_none_for_a_failed_member_and_the_workflow_still_fails():
    body = step(echo).using(on_dependency_failure="run")
    members_ = group(step(add, 1, 2), step(boom, "no"), step(add, 3, 4), step(echo, "cancelled"))
    wf = chord(members_, body).enqueue(
        on_success=step(echo, "ok"), on_failure=step(echo, "bad"), on_finish=step(echo, "done")
    )
    Job.objects.filter(workflow=wf).update(max_attempts=1)
    lifecycle.cancel(job_of(wf, 3).pk)
    drain()
    ran = job_of(wf, 4)
    # The members' results in group order; a failed or cancelled member has none.
    assert ran.status == "succeeded" and ran.result == [[3, None, 7, None]]
    wf.refresh_from_db()
    assert wf.status == "failed" and sorted(callback_jobs(wf)) == ["on_failure", "on_finish"]


def test_a_takes_context_task_sees_its_workflow_callbacks_too():
    wf = chain(step(workflow_seen), step(workflow_seen)).enqueue(on_finish=step(workflow_seen))
    drain()
    assert results(wf) == [wf.pk, wf.pk]
    assert callback_jobs(wf)["on_finish"].result == wf.pk
    lone, _ = enqueue(workflow_seen)
    drain()
    assert Job.objects.get(pk=lone.pk).result is None


def test_an_empty_block_ends_at_once_and_an_exception_rolls_the_block_back():
    with Workflow(name="empty", on_finish=step(echo, "done")) as wf:
        pass
    wf.refresh_from_db()
    assert wf.status == "succeeded" and list(callback_jobs(wf)) == ["on_finish"]
    before = Job.objects.count()
    with pytest.raises(RuntimeError), Workflow(name="broken") as broken:
        add.enqueue(1, 2)
        raise RuntimeError("no")
    assert Job.objects.count() == before
    assert not type(broken).objects.filter(pk=broken.pk).exists()


def test_a_bad_callback_is_refused_when_the_block_closes():
    with pytest.raises(ValidationError) as caught, Workflow(on_success=step("no.such.task")):
        add.enqueue(1, 2)
    assert "on_success" in caught.value.message_dict
    assert not Job.objects.exists()


@pytest.mark.parametrize("make", ["block", "canvas"])
def test_a_callback_depending_on_no_job_is_refused_at_creation(make):
    """The callbacks take the jobs' rules, existence of the jobs they depend on included; nothing is made."""
    kept = add.enqueue(1, 1).id
    # A callback given as a job spec may name any field of one (a step takes no depends_on).
    on_success = {"task": ECHO, "args": ["ok"], "depends_on": [987654]}
    on_finish = {"task": ECHO, "depends_on": [int(kept)]}
    with pytest.raises(ValidationError) as caught:
        if make == "block":
            with Workflow(on_success=on_success, on_finish=on_finish):
                add.enqueue(1, 2)
        else:
            chain(step(add, 1, 2)).enqueue(on_success=on_success, on_finish=on_finish)
    assert caught.value.message_dict == {"on_success": ["depends_on: No job has the id 987654."]}
    assert list(Job.objects.values_list("pk", flat=True)) == [int(kept)]


def test_a_callback_that_cannot_be_enqueued_when_the_workflow_ends_is_a_failed_job_saying_why():
    """Its dependency was pruned in between: the workflow still ends, the callback is a failed job of it, the rest run."""
    gone = int(add.enqueue(1, 1).id)
    wf = chain(step(add, 1, 2)).enqueue(
        on_success={"task": ECHO, "args": ["ok"], "depends_on": [gone]}, on_finish=step(echo, "done")
    )
    Job.objects.filter(pk=gone).delete()
    drain()
    wf.refresh_from_db()
    assert wf.status == "succeeded" and members(wf).count() == 1
    made = callback_jobs(wf)
    refused, ran = made["on_success"], made["on_finish"]
    assert ran.status == "succeeded" and ran.result == ["done"]
    assert (refused.status, refused.task, refused.args, refused.workflow_id) == ("failed", ECHO, ["ok"], wf.pk)
    assert refused.finished_at is not None and refused.attempts == 0
    [error] = refused.errors
    assert error["exception_class"] == "scheduler_app.lifecycle.CallbackRefused"
    assert error["message"] == (
        f"The workflow's on_success callback could not be enqueued: depends_on: No job has the id {gone}."
    )
    [entry] = [e for e in wf.callbacks["enqueued"] if e["callback"] == "on_success"]
    assert entry["error"] == f"depends_on: No job has the id {gone}."


def test_a_callback_whose_task_is_gone_when_the_workflow_ends_is_a_failed_job_too():
    from scheduler_app.models import Workflow as Row

    wf = chain(step(add, 1, 2)).enqueue(on_failure=step(echo), on_finish=step(echo, "done"))
    Row.objects.filter(pk=wf.pk).update(callbacks={"on_finish": {"task": "gone.task", "kwargs": {"n": 1}}})
    drain()
    refused = callback_jobs(wf)["on_finish"]
    assert (refused.status, refused.task, refused.kwargs) == ("failed", "gone.task", {"n": 1})
    assert refused.errors[0]["message"].startswith("The workflow's on_finish callback could not be enqueued: task: ")


def test_the_status_rule():
    assert derive_status({}) == "succeeded"
    assert derive_status({JobStatus.PENDING: 2, JobStatus.WAITING: 1}) == "pending"
    assert derive_status({JobStatus.PENDING: 2, JobStatus.SUCCEEDED: 1}) == "running"
    assert derive_status({JobStatus.RUNNING: 1}) == "running"
    assert derive_status({JobStatus.SUCCEEDED: 2, JobStatus.CANCELLED: 1}) == "cancelled"
    assert derive_status({JobStatus.FAILED: 1, JobStatus.CANCELLED: 3}) == "failed"
    assert derive_status({JobStatus.SUCCEEDED: 3}) == "succeeded"


def test_step_using_sets_job_options_like_task_using():
    wf = chain(step(add, 1, 2).using(priority=7, queue_name="other", max_attempts=4, timeout=9)).enqueue()
    job = job_of(wf, 0)
    assert (job.priority, job.queue, job.max_attempts, job.timeout) == (7, "other", 4, 9)
    with pytest.raises(TypeError):
        step(add, 1, 2).using(colour="red")


@pytest.mark.django_db(transaction=True)
def test_two_finishes_ending_the_last_two_jobs_at_once_enqueue_the_callbacks_once():
    """Threads with their own connections end a workflow's last two jobs at the same moment, 20 times.

    Whichever commits second sees the other's ending (the row lock, then a
    count): the callbacks come once, never twice, never not at all. On
    SQLite the writers take turns; on PostgreSQL they really overlap.
    """
    from scheduler_app.vocabulary.jobs import Outcome
    from tests.lifecycle.test_dependencies import race

    for round_ in range(20):
        wf = group(step(add, 1, round_), step(add, 2, round_)).enqueue(
            on_success=step(echo, "ok"), on_finish=step(echo, "done")
        )
        first, second = claim("w", queues=["default"], limit=2, lease=30)
        race(
            *[
                lambda job=job: lifecycle.finish([Outcome(job.id, "w", job.attempt, "succeeded", result_json="1")])
                for job in (first, second)
            ]
        )
        wf.refresh_from_db()
        assert wf.status == "succeeded", round_
        assert sorted(e["callback"] for e in wf.callbacks["enqueued"]) == ["on_finish", "on_success"], round_
        assert Job.objects.filter(workflow=wf, task=ECHO).count() == 2, round_
        drain()


def test_a_job_lost_with_its_dispatcher_ends_the_workflow_through_the_rescue():
    from datetime import timedelta

    from django.utils import timezone

    wf = chain(step(add, 1, 2).using(max_attempts=1), step(double)).enqueue(on_failure=step(echo, "lost"))
    [claimed] = claim("gone", queues=["default"], limit=1, lease=1)
    assert lifecycle.rescue_expired(now=timezone.now() + timedelta(seconds=30)) == 1
    wf.refresh_from_db()
    assert wf.status == "failed"
    assert list(members(wf).order_by("pk").values_list("status", flat=True)) == ["failed", "cancelled"]
    assert list(callback_jobs(wf)) == ["on_failure"]


def test_a_steps_using_takes_the_operators_fields():
    """Tags, meta, a concurrency key and an expiry reach the step's job; a bad tag is refused like anywhere else."""
    from django.core.exceptions import ValidationError

    from scheduler_app.models import Job
    from scheduler_app.workflows import chain, step
    from tests.testapp.tasks import double

    workflow = chain(
        step(double, 1).using(
            tags=["import", "team:7"], meta={"ticket": 42}, concurrency_key="acct:7", expires_in="2h"
        ),
        step(double),
    ).enqueue()
    first = Job.objects.filter(workflow=workflow).order_by("pk").first()
    assert first.tags == ["import", "team:7"] and first.meta == {"ticket": 42}
    assert first.concurrency_key == "acct:7" and first.expires_at is not None
    with pytest.raises(ValidationError):
        chain(step(double, 1).using(tags=["not a tag!"])).enqueue()
