"""The one table of status changes (``vocabulary.states``) and who reads it."""

import pytest

from scheduler_app.vocabulary.jobs import Status
from scheduler_app.vocabulary.states import DEPENDENCIES, DISPATCHER, LEADER, OPERATOR, TRANSITIONS, sources

pytestmark = pytest.mark.once


def test_every_status_is_reached_and_left_and_a_finished_job_only_by_a_retry():
    reached = {s for t in TRANSITIONS.values() for s in t.targets}
    left = {s for t in TRANSITIONS.values() for s in t.sources}
    assert reached >= set(Status.ALL) - {Status.WAITING} and left == set(Status.ACTIVE) | set(Status.FINISHED) - {
        Status.SUCCEEDED
    }
    leaving_an_end = {t.name for t in TRANSITIONS.values() if set(t.sources) & set(Status.FINISHED)}
    assert leaving_an_end == {"retry"}


def test_who_makes_each_change():
    by = {name: t.by for name, t in TRANSITIONS.items()}
    assert {n for n, who in by.items() if who == OPERATOR} == {"cancel", "retry", "reschedule", "run now"}
    assert {n for n, who in by.items() if who == LEADER} == {"rescue", "expire"}
    assert by["claim"] == by["finish"] == DISPATCHER and by["dependencies met"] == DEPENDENCIES
    assert all(t.done for t in TRANSITIONS.values() if t.by == OPERATOR)


def test_the_operators_actions_and_refusals_read_the_table():
    from scheduler_app.lifecycle.states import allowed_from, refusal

    for name in ("cancel", "retry", "reschedule", "run now"):
        assert allowed_from(name) == sources(name)
    assert refusal("retry", 7, "running") == "Only failed or cancelled jobs can be retried; job 7 is running."


def test_the_statements_read_the_table():
    from scheduler_app.sql import expiry, leases
    from scheduler_app.sql.base import status_in

    assert status_in("expire") == "status IN ('pending', 'waiting')"  # as job_expiring_idx states it
    assert status_in("claim") == "status = 'pending'" and status_in("rescue", "j.") == "j.status = 'running'"
    assert status_in("expire") in expiry._PG and status_in("expire") in expiry._SQLITE
    import inspect

    source = inspect.getsource(leases)
    for change in ("rescue", "renew", "release", "take back"):
        assert f"status_in('{change}'" in source
    assert "status = 'running'" not in source
