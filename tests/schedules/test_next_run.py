"""Next-run computation: cron in a time zone (DST, month ends) and anchored intervals."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ValidationError

from scheduler_app.schedules import describe, missed_runs, next_run, validate_cron, validate_timezone

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def cron(expr, tz="UTC", **extra):
    return {"cron": expr, "timezone": tz, "interval_seconds": None, **extra}


def runs(schedule, start, n):
    out, after = [], start
    for _ in range(n):
        after = next_run(schedule, after, anchor=after if schedule.get("interval_seconds") else None)
        out.append(after)
    return out


def local(values, zone):
    return [v.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z") for v in values]


def test_result_is_utc_and_strictly_after():
    at = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    result = next_run(cron("0 12 * * *"), at)
    assert result == datetime(2025, 1, 2, 12, 0, tzinfo=UTC) and result.tzinfo is UTC


def test_weekdays_at_two_in_berlin():
    start = datetime(2025, 1, 2, 12, 0, tzinfo=UTC)  # a Thursday
    got = runs(cron("0 2 * * 1-5", "Europe/Berlin"), start, 3)
    assert local(got, BERLIN) == ["2025-01-03 02:00 CET", "2025-01-06 02:00 CET", "2025-01-07 02:00 CET"]
    assert got[0] == datetime(2025, 1, 3, 1, 0, tzinfo=UTC)


def test_berlin_spring_forward_runs_a_nonexistent_time_once_at_the_next_valid_minute():
    # 2025-03-30: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    got = runs(cron("30 2 * * *", "Europe/Berlin"), datetime(2025, 3, 28, 12, tzinfo=UTC), 4)
    assert local(got, BERLIN) == [
        "2025-03-29 02:30 CET",
        "2025-03-30 03:00 CEST",
        "2025-03-31 02:30 CEST",
        "2025-04-01 02:30 CEST",
    ]


def test_berlin_fall_back_runs_an_ambiguous_time_once():
    # 2025-10-26: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    got = runs(cron("30 2 * * *", "Europe/Berlin"), datetime(2025, 10, 24, 12, tzinfo=UTC), 3)
    assert local(got, BERLIN) == ["2025-10-25 02:30 CEST", "2025-10-26 02:30 CEST", "2025-10-27 02:30 CET"]
    # Asked again from inside the repeated hour, it does not run the second 02:30.
    second_pass = datetime(2025, 10, 26, 1, 10, tzinfo=UTC)  # 02:10 CET, after the first 02:30
    assert local([next_run(cron("30 2 * * *", "Europe/Berlin"), second_pass)], BERLIN) == ["2025-10-27 02:30 CET"]


def test_daily_runs_stay_24_wall_clock_hours_apart_in_utc_terms_change():
    got = runs(cron("0 9 * * *", "America/New_York"), datetime(2025, 3, 8, 0, tzinfo=UTC), 2)
    assert local(got, NEW_YORK) == ["2025-03-08 09:00 EST", "2025-03-09 09:00 EDT"]
    assert got[1] - got[0] == timedelta(hours=23)


def test_new_york_spring_forward_and_fall_back():
    spring = runs(cron("30 2 * * *", "America/New_York"), datetime(2025, 3, 8, 12, tzinfo=UTC), 2)
    assert local(spring, NEW_YORK) == ["2025-03-09 03:00 EDT", "2025-03-10 02:30 EDT"]
    fall = runs(cron("30 1 * * *", "America/New_York"), datetime(2025, 11, 1, 12, tzinfo=UTC), 2)
    assert local(fall, NEW_YORK) == ["2025-11-02 01:30 EDT", "2025-11-03 01:30 EST"]


def test_every_thirty_minutes_runs_by_elapsed_time_through_fall_back():
    got = runs(cron("*/30 * * * *", "Europe/Berlin"), datetime(2025, 10, 25, 23, 10, tzinfo=UTC), 5)
    assert [g - datetime(2025, 10, 25, 23, 0, tzinfo=UTC) for g in got] == [
        timedelta(minutes=30 * k) for k in range(1, 6)
    ]


def test_month_ends():
    start = datetime(2025, 1, 1, tzinfo=UTC)
    assert [d.date().isoformat() for d in runs(cron("0 0 31 * *"), start, 4)] == [
        "2025-01-31",
        "2025-03-31",
        "2025-05-31",
        "2025-07-31",
    ]
    assert [d.date().isoformat() for d in runs(cron("0 12 L * *"), start, 3)] == [
        "2025-01-31",
        "2025-02-28",
        "2025-03-31",
    ]
    leap = runs(cron("0 0 29 2 *"), start, 1)
    assert leap[0].date().isoformat() == "2028-02-29"


def test_start_and_end_bound_cron_runs():
    start_at = datetime(2025, 6, 1, 0, 0, tzinfo=UTC)
    schedule = cron("0 0 * * *", start_at=start_at, end_at=datetime(2025, 6, 2, 12, tzinfo=UTC))
    assert next_run(schedule, datetime(2025, 1, 1, tzinfo=UTC)) == start_at
    assert next_run(schedule, start_at) == datetime(2025, 6, 2, tzinfo=UTC)
    assert next_run(schedule, datetime(2025, 6, 2, tzinfo=UTC)) is None


def test_interval_is_anchored_and_does_not_drift():
    schedule = {"cron": "", "interval_seconds": 300}
    now = datetime(2025, 1, 1, 12, 0, 7, 500000, tzinfo=UTC)
    assert next_run(schedule, now) == now + timedelta(seconds=300)
    anchor = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    # Materialised 2.3 s late: the next run is still on the 5-minute grid.
    assert next_run(schedule, anchor + timedelta(seconds=2.3), anchor=anchor) == anchor + timedelta(minutes=5)
    # After an outage: the first grid point after now.
    assert next_run(schedule, anchor + timedelta(minutes=61), anchor=anchor) == anchor + timedelta(minutes=65)


def test_interval_anchored_on_start_at():
    start_at = datetime(2025, 1, 1, 0, 0, tzinfo=UTC)
    schedule = {"cron": "", "interval_seconds": 3600, "start_at": start_at}
    assert next_run(schedule, start_at - timedelta(days=1)) == start_at
    assert next_run(schedule, start_at + timedelta(minutes=90)) == start_at + timedelta(hours=2)
    assert next_run(schedule, start_at) == start_at + timedelta(hours=1)


def test_missed_runs_are_the_most_recent_bounded():
    first = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    now = first + timedelta(minutes=60, seconds=30)
    got = missed_runs(cron("* * * * *"), first, now, 10)
    assert got == [first + timedelta(minutes=m) for m in range(51, 61)]
    got = missed_runs({"interval_seconds": 60}, first, now, 10)
    assert got == [first + timedelta(minutes=m) for m in range(51, 61)]
    assert missed_runs(cron("* * * * *"), first, first + timedelta(minutes=2), 10) == [
        first,
        first + timedelta(minutes=1),
        first + timedelta(minutes=2),
    ]


@pytest.mark.parametrize(
    "expr, fragment",
    [
        ("* * * *", "4 fields"),
        ("* * * * * *", "6 fields"),
        ("61 * * * *", "Bad minute"),
        ("* 24 * * *", "Bad hour"),
        ("* * 32 * *", "Bad day-of-month"),
        ("* * * 13 *", "Bad month"),
        ("* * * * MONDAY", "Bad day-of-week"),
        ("0 0 30 2 *", "Bad day-of-month"),
        ("", "0 fields"),
    ],
)
def test_invalid_cron_expressions_say_what_is_wrong(expr, fragment):
    with pytest.raises(ValidationError) as info:
        validate_cron(expr)
    assert fragment in info.value.message_dict["cron"][0]


def test_cron_is_normalised():
    assert validate_cron("  0   2 * *   1-5 ") == "0 2 * * 1-5"


@pytest.mark.parametrize("name", ["Europe/Berln", "", "../etc/passwd", "CET+1", None])
def test_invalid_time_zones(name):
    with pytest.raises(ValidationError) as info:
        validate_timezone(name)
    assert "time zone" in info.value.message_dict["timezone"][0]


def test_describe():
    assert describe(cron("0 2 * * 1-5", "Europe/Berlin")) == "At 02:00 on Monday through Friday (Europe/Berlin)"
    assert describe({"interval_seconds": 300}) == "Every 5 minutes"
    assert describe({"interval_seconds": 3600}) == "Every hour"
    assert describe({"interval_seconds": 90}) == "Every 90 seconds"
