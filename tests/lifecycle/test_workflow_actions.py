"""Retry and cancel of a workflow as a whole (lifecycle.workflows): compare-and-set through the job service."""

import pytest

from scheduler_app.lifecycle import workflows
from scheduler_app.models import Job, JobStatus, Workflow, WorkflowStatus
from scheduler_app.testing import drain
from tests.admin.workflow_fixtures import workflow_of

pytestmark = pytest.mark.django_db

BOOM = "tests.testapp.tasks.boom"


def statuses(jobs):
    return [Job.objects.get(pk=j.pk).status for j in jobs]


def test_derived_status():
    d = workflows.derived_status
    assert d({}) == WorkflowStatus.PENDING
    assert d({"pending": 2, "waiting": 1}) == WorkflowStatus.PENDING
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
    assert workflows.store_status(workflow.pk) == WorkflowStatus.FAILED
    outcome = workflows.retry_workflow(workflow)
    assert outcome == {"retried": 3, "skipped": 0, "status": WorkflowStatus.RUNNING}
    assert statuses([a, b, c, d]) == ["pending", "waiting", "waiting", "succeeded"]
    assert Job.objects.get(pk=b.pk).dependencies_left == 1
    assert "failed" in Job.objects.get(pk=b.pk).errors[-1]["message"]  # what happened stays
    assert Workflow.objects.get(pk=workflow.pk).finished_at is None
    Job.objects.filter(pk=a.pk).update(task="tests.testapp.tasks.add", args=[1, 2])  # the fix is deployed
    drain()
    assert statuses([a, b, c, d]) == ["succeeded"] * 4
    assert workflows.retry_workflow(workflow)["retried"] == 0


def test_cancel_ends_what_has_not_started_and_asks_the_running_to_stop(set_status):
    workflow, jobs = workflow_of([{}, {}, {"depends_on_index": [0]}])
    set_status(jobs[1], JobStatus.RUNNING)
    outcome = workflows.cancel_workflow(workflow.pk)
    assert outcome == {"cancelled": 2, "cancel_requested": 1, "skipped": 0, "status": WorkflowStatus.RUNNING}
    assert statuses(jobs) == ["cancelled", "running", "cancelled"]
    assert workflows.cancel_workflow(workflow)["cancelled"] == 0  # nothing left to cancel; the running one was asked


def test_a_retried_job_whose_unique_key_is_taken_is_skipped_with_its_dependents():
    workflow, (a, b) = workflow_of([{"unique_key": "k1"}, {"depends_on_index": [0]}])
    workflows.cancel_workflow(workflow)
    workflow_of([{"unique_key": "k1"}], name="the holder")
    assert workflows.retry_workflow(workflow) == {"retried": 0, "skipped": 2, "status": WorkflowStatus.CANCELLED}
    assert statuses([a, b]) == ["cancelled", "cancelled"]
