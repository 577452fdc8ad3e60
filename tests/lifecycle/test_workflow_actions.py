"""Retry and cancel of a workflow as a whole (lifecycle.actions): compare-and-set through the job service."""

import pytest

from scheduler_app.lifecycle import InvalidTransition, cancel_workflow, retry_workflow, workflows
from scheduler_app.models import Job, JobStatus, Workflow, WorkflowStatus
from scheduler_app.testing import drain
from tests.admin.workflow_fixtures import workflow_of

pytestmark = pytest.mark.django_db

BOOM = "tests.testapp.tasks.boom"


def statuses(jobs):
    return [Job.objects.get(pk=j.pk).status for j in jobs]


def test_derived_status():
    d = workflows.derive_status
    assert d({}) == WorkflowStatus.SUCCEEDED  # nothing left to do
    assert d({"pending": 2, "waiting": 1, "succeeded": 0}) == WorkflowStatus.PENDING
    assert d({"running": 1, "waiting": 1}) == WorkflowStatus.RUNNING
    assert d({"succeeded": 1, "waiting": 1}) == WorkflowStatus.RUNNING
    assert d({"succeeded": 3}) == WorkflowStatus.SUCCEEDED
    assert d({"succeeded": 1, "failed": 1, "cancelled": 2}) == WorkflowStatus.FAILED
    assert d({"succeeded": 1, "cancelled": 2}) == WorkflowStatus.CANCELLED


def test_retry_revives_the_failed_job_and_the_dependents_it_cancelled_then_they_run():
    # a fails for good; b (after a) and c (after b) are cancelled because of it; d, beside them, succeeds.
    workflow, (a, b, c, d) = workflow_of(
        [{"task": BOOM, "args": [], "max_attempts": 1}, {"depends_on_index": [0]}, {"depends_on_index": [1]}, {}]
    )
    drain()
    assert statuses([a, b, c, d]) == ["failed", "cancelled", "cancelled", "succeeded"]
    assert workflows.refresh(workflow.pk).status == WorkflowStatus.FAILED
    retried = retry_workflow(workflow.pk)
    assert retried.status == WorkflowStatus.RUNNING and retried.finished_at is None
    assert statuses([a, b, c, d]) == ["pending", "waiting", "waiting", "succeeded"]
    assert Job.objects.get(pk=b.pk).dependencies_left == 1
    assert "failed" in Job.objects.get(pk=b.pk).errors[-1]["message"]  # what happened stays
    assert Workflow.objects.get(pk=workflow.pk).finished_at is None
    Job.objects.filter(pk=a.pk).update(task="tests.testapp.tasks.add", args=[1, 2])  # the fix is deployed
    drain()
    assert statuses([a, b, c, d]) == ["succeeded"] * 4
    assert retry_workflow(workflow.pk).status == WorkflowStatus.SUCCEEDED  # nothing to retry


def test_cancel_ends_what_has_not_started_and_asks_the_running_to_stop(set_status):
    workflow, jobs = workflow_of([{}, {}, {"depends_on_index": [0]}])
    set_status(jobs[1], JobStatus.RUNNING)
    assert cancel_workflow(workflow.pk).status == WorkflowStatus.RUNNING  # until the running one stops
    assert statuses(jobs) == ["cancelled", "running", "cancelled"]
    assert Job.objects.get(pk=jobs[1].pk).cancel_requested
    assert cancel_workflow(workflow.pk).status == WorkflowStatus.RUNNING  # again: nothing changes


def test_a_retry_refused_for_one_job_changes_nothing():
    workflow, (a, b) = workflow_of([{"unique_key": "k1"}, {"depends_on_index": [0]}])
    cancel_workflow(workflow.pk)
    workflow_of([{"unique_key": "k1"}], name="the holder")
    with pytest.raises(InvalidTransition, match="unique_key"):
        retry_workflow(workflow.pk)
    assert statuses([a, b]) == ["cancelled", "cancelled"]
    assert Workflow.objects.get(pk=workflow.pk).status == WorkflowStatus.CANCELLED


def test_the_callbacks_jobs_are_not_counted():
    workflow, (a, callback) = workflow_of([{}, {}])
    Job.objects.filter(pk=a.pk).update(status=JobStatus.SUCCEEDED)
    Workflow.objects.filter(pk=workflow.pk).update(
        callbacks={"enqueued": [{"callback": "on_success", "job": callback.pk}]}
    )
    workflow.refresh_from_db()
    assert workflows.counts([workflow]) == {workflow.pk: {"succeeded": 1}}
    assert workflows.refresh(workflow.pk).status == WorkflowStatus.SUCCEEDED  # its callback still pending
    assert cancel_workflow(workflow.pk) and statuses([callback]) == ["pending"]
