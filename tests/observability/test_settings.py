"""The observability settings go through the same rules and system checks as every other."""

from datetime import timedelta

import pytest
from django.core import checks
from django.test import override_settings

from scheduler_app.observability import joblogs


def ids(**scheduler):
    with override_settings(SCHEDULER=scheduler):
        return sorted(m.id for m in checks.run_checks(tags=["scheduler"]) if m.id != "scheduler_app.E002")


@pytest.mark.parametrize(
    "scheduler",
    [
        {"JOB_LOG_LEVEL": "LOUD"},
        {"JOB_LOG_LEVEL": 99},
        {"JOB_LOG_MAX_RECORDS": -1},
        {"JOB_LOG_MAX_BYTES": "64k"},
        {"ROLLUP_INTERVAL": -5},
        {"ROLLUP_RETENTION": 7},
        {"METRICS_TOKEN": "short"},
        {"METRICS_TOKEN": "a-long-enough-token\n"},
    ],
)
def test_bad_values_are_reported_at_start_up(scheduler):
    assert ids(**scheduler) == ["scheduler_app.E005"]


def test_good_values_pass():
    assert (
        ids(
            JOB_LOG_LEVEL="warning",
            JOB_LOG_MAX_RECORDS=0,
            JOB_LOG_MAX_BYTES=1024,
            ROLLUP_INTERVAL=0,
            ROLLUP_RETENTION=timedelta(days=30),
            METRICS_TOKEN="0123456789abcdef",
        )
        == []
    )
    with override_settings(SCHEDULER={"JOB_LOG_LEVEL": "warning"}):
        assert joblogs.level() == 30
