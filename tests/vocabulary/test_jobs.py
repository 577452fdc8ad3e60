"""The job vocabulary: how an attempt's ending meets a requested cancel, and what an Outcome may say."""

import dataclasses

import pytest

from scheduler_app.vocabulary.jobs import ClaimedJob, Outcome, Status, attempt_end
from tests.dispatcher.fake_executor import claimed_job

# Every ending an attempt can have, and what it leaves the job in when a cancel was requested.
# A success stands (the work was done); anything else ends the job cancelled (invariant 14).
WITH_CANCEL = {
    Status.SUCCEEDED: Status.SUCCEEDED,
    Status.FAILED: Status.CANCELLED,
    Status.CANCELLED: Status.CANCELLED,
    Status.PENDING: Status.CANCELLED,
}


def test_the_table_covers_every_outcome_status():
    assert set(WITH_CANCEL) == set(Status.OUTCOMES)


@pytest.mark.parametrize("status", Status.OUTCOMES)
def test_without_a_cancel_request_an_attempt_ends_as_it_ended(status):
    assert attempt_end(status, False) == status


@pytest.mark.parametrize("flag", [True, 1])  # 1: a boolean column read by raw SQL on SQLite
@pytest.mark.parametrize("status", Status.OUTCOMES)
def test_with_a_cancel_request_only_a_success_stands(status, flag):
    assert attempt_end(status, flag) == WITH_CANCEL[status]


@pytest.mark.parametrize("flag", [0, None, "", []])
def test_a_falsy_flag_is_no_cancel_request(flag):
    # The flag comes from a row (a bool column) or a ClaimedJob; anything falsy is "not requested".
    assert attempt_end(Status.PENDING, flag) == Status.PENDING
    assert attempt_end(Status.FAILED, flag) == Status.FAILED


def test_the_statuses_a_cancel_overrides_are_the_outcomes_but_success_and_cancel():
    assert set(Status.YIELD_TO_CANCEL) == set(Status.OUTCOMES) - {Status.SUCCEEDED, Status.CANCELLED}


def test_status_groups_partition_the_statuses():
    assert set(Status.ACTIVE) | set(Status.FINISHED) == set(Status.ALL)
    assert not set(Status.ACTIVE) & set(Status.FINISHED)
    assert set(Status.OUTCOMES) == set(Status.FINISHED) | {Status.PENDING}
    assert len(set(Status.ALL)) == len(Status.ALL) == 6


@pytest.mark.parametrize("status", Status.OUTCOMES)
def test_an_outcome_takes_every_outcome_status(status):
    outcome = Outcome(1, "w", 1, status)
    assert outcome.status == status
    assert (outcome.result_json, outcome.error, outcome.retry_at, outcome.logs, outcome.snoozed) == (
        None,
        None,
        None,
        (),
        False,
    )


@pytest.mark.parametrize("status", [Status.WAITING, Status.RUNNING, "PENDING", "Succeeded", "", "done", None, 1])
def test_an_outcome_refuses_a_status_that_is_not_an_ending(status):
    with pytest.raises(ValueError, match="not an outcome status") as caught:
        Outcome(1, "w", 1, status)
    assert repr(status) in str(caught.value)


def test_an_outcome_refuses_a_changed_copy_with_a_bad_status():
    outcome = Outcome(1, "w", 1, Status.SUCCEEDED, result_json="1")
    with pytest.raises(ValueError):
        dataclasses.replace(outcome, status=Status.RUNNING)
    assert dataclasses.replace(outcome, status=Status.FAILED).result_json == "1"


def test_an_outcome_is_frozen():
    outcome = Outcome(1, "w", 1, Status.SUCCEEDED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.status = Status.RUNNING  # would slip past the check in __post_init__


def test_a_claimed_job_defaults_and_changed_copies():
    job = claimed_job(7, attempt=2, max_attempts=3)
    assert (job.errors, job.snoozes, job.enqueued_at) == ("[]", 0, None)
    # slots: a typo in a field name is an error, not a new attribute
    with pytest.raises(AttributeError):
        job.atempt = 3
    again = dataclasses.replace(job, attempt=3)
    assert (again.attempt, job.attempt) == (3, 2)
    assert isinstance(again, ClaimedJob)


def test_the_models_status_is_the_vocabulary_status():
    # One type: the public name in the models is the dispatcher's class, not a copy of its values.
    from scheduler_app.models import ACTIVE_STATUSES, FINISHED_STATUSES, JobStatus

    assert JobStatus is Status
    assert (ACTIVE_STATUSES, FINISHED_STATUSES) == (Status.ACTIVE, Status.FINISHED)


def test_a_status_reads_as_django_choices_and_as_its_text():
    assert Status.values == list(Status.ALL)
    assert Status.choices == [(s, s.capitalize()) for s in Status.ALL]
    assert Status("failed") is Status.FAILED and Status.FAILED.label == "Failed"
    assert (str(Status.RUNNING), f"{Status.RUNNING}", Status.RUNNING == "running") == ("running", "running", True)
