"""Every admin page, the dashboard and /metrics read any stored row without a 500, in any time zone (invariant 13).

Rows are written around the service with SQL (``tests/planted.py``): times
past Python's years (PostgreSQL: year 10000, infinity, BC; SQLite: text
that is no time), progress of any shape, JSON with lone surrogates, text
that is not UTF-8. Each page answers; none of them a 500.
"""

import pytest
from django.test import override_settings

from scheduler_app.models import Job, Worker
from scheduler_app.sql.readable import END_OF_TIME, START_OF_TIME
from tests import planted

pytestmark = pytest.mark.django_db


def act(client, jobs, action):
    """Run an admin action on every job; return its answer's status."""
    client.raise_request_exception = False
    data = {"action": action, "_selected_action": [j.pk for j in jobs.values()]}
    return client.post("/admin/scheduler_app/job/", data).status_code


@pytest.mark.parametrize("value, zone", planted.times())
def test_times_no_zone_or_no_python_can_hold(admin_client_, value, zone):
    jobs = planted.world()
    planted.plant_time(value)
    with override_settings(TIME_ZONE=zone):
        assert planted.visit(admin_client_, planted.pages(jobs)) == []
        assert act(admin_client_, jobs, "cancel_jobs") == 302
        assert act(admin_client_, jobs, "retry_jobs") == 302
        assert planted.visit(admin_client_, ["/admin/scheduler_app/job/"]) == []


@pytest.mark.parametrize("column", ["execute_at", "created_at", "last_attempted_at", "finished_at"])
def test_one_time_past_the_years_on_its_own(admin_client_, column):
    # The other times ordinary: what a page computes from two of them (a duration, a lag) must hold too.
    jobs = planted.world()
    planted.plant_time(planted.times()[0][0], models=[Job], columns=[column])
    with override_settings(TIME_ZONE="Asia/Tokyo"):
        assert planted.visit(admin_client_, planted.pages(jobs)) == []


@pytest.mark.postgres_only
@pytest.mark.parametrize(
    "value, read",
    [
        ("10000-01-01 00:00:00+00", END_OF_TIME),
        ("infinity", END_OF_TIME),
        ("-infinity", START_OF_TIME),
        ("4713-01-01 00:00:00+00 BC", START_OF_TIME),
    ],
)
def test_postgresql_times_read_as_the_end_of_time_they_passed(value, read):
    jobs = planted.world()
    planted.plant_time(value, models=[Job], columns=["execute_at"])
    assert Job.objects.get(pk=jobs["pending"].pk).execute_at == read
    assert Job.objects.filter(pk=jobs["pending"].pk).values_list("execute_at", flat=True).get() == read


@pytest.mark.parametrize(
    "zone, shown", [("Asia/Tokyo", "9999-12-31 23:59:59 UTC"), ("America/New_York", "9999-12-31 18:59:59 EST")]
)
def test_the_last_instant_is_shown_in_utc_where_the_zone_has_no_such_date(admin_client_, zone, shown):
    jobs = planted.world()
    planted.plant_time(planted.EDGE_TIMES[0][0], models=[Job], columns=["execute_at"])
    with override_settings(TIME_ZONE=zone):
        page = admin_client_.get(f"/admin/scheduler_app/job/{jobs['pending'].pk}/change/")
    assert page.status_code == 200
    assert shown in page.content.decode()


# -- progress ------------------------------------------------------------------------

ODD_PROGRESS = [
    {"current": "3", "total": "10", "message": ""},
    {"current": None, "total": 10, "message": ""},
    {"current": 5, "total": 0},
    {"current": 11, "total": 10},
    {"current": -1, "total": 10},
    {"current": 1, "total": 1e-300},
    {"current": 1e308, "total": 1e308},
    {"current": 10**30, "total": 3},
    {"current": True, "total": {"a": 1}, "message": 7, "updated_at": 5},
    {"message": "x" * 100_000, "updated_at": "2026-02-30T00:00:00Z"},
    [1, 2],
    "halfway",
    42,
]


@pytest.mark.parametrize("progress", ODD_PROGRESS, ids=range(len(ODD_PROGRESS)))
def test_any_stored_progress(admin_client_, progress):
    jobs = planted.world()
    Job.objects.filter(pk=jobs["running"].pk).update(progress=progress)
    assert planted.visit(admin_client_, planted.pages(jobs)) == []


def test_progress_is_shown_by_the_one_rule(admin_client_):
    jobs = planted.world()
    running = jobs["running"].pk
    Job.objects.filter(pk=running).update(progress={"current": 11, "total": 10, "message": "over"})
    page = admin_client_.get(f"/admin/scheduler_app/job/{running}/change/").content.decode()
    assert '<progress max="100" value="100"></progress> 11/10 · over' in page
    Job.objects.filter(pk=running).update(progress={"current": "3", "total": 10, "message": "m"})
    page = admin_client_.get(f"/admin/scheduler_app/job/{running}/change/").content.decode()
    assert '<progress max="100" value="0"></progress> ?/10 · m' in page
    listed = admin_client_.get("/admin/scheduler_app/job/").content.decode()
    assert "Running ·" not in listed  # no percentage without a current


# -- text no page can encode ----------------------------------------------------------


def test_lone_surrogates_and_nul_in_json_read_as_replacement_characters(admin_client_):
    """SQLite stores JSON escapes of lone surrogates and NUL; PostgreSQL's jsonb refuses them (so there: nothing to read)."""
    jobs = planted.world()
    if planted.is_postgres():
        pytest.skip("jsonb refuses \\udcff and \\u0000 escapes")
    failed = jobs["failed"].pk
    bad = '[{"attempt": 1, "time": "x", "worker": "w", "exception_class": "E\\udcff", "message": "bad \\udcff \\u0000", "traceback": "\\ud800"}]'
    planted.plant(Job, failed, errors=bad, args='["\\udfff"]', kwargs='{"\\ud800": "\\u0000"}', result='"\\udcff"')
    planted.plant(Job, jobs["running"].pk, progress='{"current": 1, "total": 2, "message": "\\udcff"}')
    planted.plant(Worker, planted.WORKER, queues='["default", "\\udcff"]')
    assert planted.visit(admin_client_, planted.pages(jobs)) == []
    job = Job.objects.get(pk=failed)
    assert job.errors[0]["message"] == "bad \ufffd \ufffd" and job.kwargs == {"\ufffd": "\ufffd"}
    page = admin_client_.get(f"/admin/scheduler_app/job/{failed}/change/").content.decode()
    assert "bad \ufffd \ufffd" in page


@pytest.mark.parametrize("column", ["task", "queue", "worker", "unique_key"])
def test_text_that_is_not_utf8_or_holds_nul(admin_client_, column):
    """SQLite stores any bytes as TEXT (sqlite3 raised on reading them); PostgreSQL checks its text."""
    jobs = planted.world()
    if planted.is_postgres():
        pytest.skip("PostgreSQL stores neither NUL nor invalid UTF-8 in text")
    from django.db import connection

    with connection.cursor() as cursor:
        for job in ("running", "failed"):
            cursor.execute(
                f"UPDATE scheduler_app_job SET {column} = CAST(X'61FF00EDB3BF62' || %s AS TEXT) WHERE id = %s",
                [job, jobs[job].pk],
            )
        cursor.execute("UPDATE scheduler_app_joblog SET message = CAST(X'6C6F67FF' AS TEXT)")
        cursor.execute("UPDATE scheduler_app_worker SET hostname = CAST(X'68FF00' AS TEXT)")
    assert planted.visit(admin_client_, planted.pages(jobs)) == []
    stored = Job.objects.filter(pk=jobs["failed"].pk).values_list(column, flat=True).get()
    assert stored == "a\ufffd\x00\ufffd\ufffd\ufffdbfailed"


@pytest.mark.parametrize("depth", [150, 300, 3000])
def test_json_nested_deeper_than_any_page_can_show(admin_client_, depth):
    jobs = planted.world()
    deep = "[" * depth + "]" * depth
    try:
        planted.plant(Job, jobs["succeeded"].pk, result=deep)
    except Exception:  # noqa: BLE001 - the database refused it (SQLite's json_valid stops at 1000 levels)
        pytest.skip(f"{depth} levels: the database refuses them")
    assert planted.visit(admin_client_, planted.pages(jobs)) == []


# -- the examples -------------------------------------------------------------


@override_settings(TIME_ZONE="Asia/Tokyo")
def test_a_job_at_the_last_instant_is_refused_at_creation_in_tokyo(admin_client_):
    from tests.plumbing import ADD

    data = {"task": ADD, "args": "[1, 2]", "kwargs": "{}", "execute_at_0": "10000-01-01", "execute_at_1": "08:59:59"}
    response = admin_client_.post("/admin/scheduler_app/job/add/", data)
    assert response.status_code == 200  # the form again: Django's date box has no year 10000
    data.update(execute_at_0="9999-12-31", execute_at_1="23:59:59")  # 14:59:59 UTC
    response = admin_client_.post("/admin/scheduler_app/job/add/", data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["execute_at"] == ["Must be no later than 9999-12-30T23:59:59Z."]
    assert not Job.objects.exists()


def test_a_reschedule_form_of_a_job_at_the_end_of_time_shows_it(admin_client_):
    jobs = planted.world()
    planted.plant_time(planted.times()[0][0], models=[Job], columns=["execute_at"])
    with override_settings(TIME_ZONE="Asia/Tokyo"):
        page = admin_client_.get(f"/admin/scheduler_app/job/{jobs['pending'].pk}/change/")
    assert page.status_code == 200
    assert 'value="9999-12-31"' in page.content.decode()  # the last instant Python holds, in UTC


# -- JSON of another shape than the service writes ---------------------------------------

ODD_ERRORS = [
    "oops",
    {"message": "x"},
    [1, "x", None, []],
    [{"message": 5, "attempt": {}, "time": 7, "traceback": ["x"], "worker": 3, "exception_class": None}],
    [],
]
ODD_SLOTS = [[1, 2], {"*": "x"}, {"default": -1, "slow": 1e300, "other": "2"}, "x", {"*": None}, {"*": 10**30}]
ODD_QUEUES = ["abc", [1, None], {"a": 1}, 5]


@pytest.mark.parametrize("errors", ODD_ERRORS, ids=range(len(ODD_ERRORS)))
def test_errors_of_any_shape(admin_client_, errors):
    jobs = planted.world()
    Job.objects.filter(pk__in=[j.pk for j in jobs.values()]).update(errors=errors)
    assert (
        planted.visit(admin_client_, [url for url in planted.pages(jobs) if "/job/" in url or "/dashboard/" in url])
        == []
    )


@pytest.mark.parametrize("slots, queues", list(zip(ODD_SLOTS, ODD_QUEUES * 2, strict=False)), ids=range(len(ODD_SLOTS)))
def test_dispatcher_rows_of_any_shape(admin_client_, slots, queues):
    jobs = planted.world()
    Worker.objects.update(slots=slots, queues=queues)
    assert planted.visit(admin_client_, planted.pages(jobs)[-10:]) == []


def test_every_get_answers_head_too(admin_client_):
    jobs = planted.world()
    for url in planted.pages(jobs):
        response = admin_client_.head(url)
        assert response.status_code == 200, (url, response.status_code)
        assert response.content == b""


@pytest.mark.parametrize("number", ["Infinity", "NaN", "1e308"])
def test_floats_that_are_not_numbers_json_can_write(admin_client_, number):
    """PostgreSQL's float8 holds NaN and Infinity (the check constraints' ``> 0`` lets them by); SQLite holds Infinity."""
    from django.db import connection

    jobs = planted.world()
    if not planted.is_postgres() and number == "NaN":
        pytest.skip("SQLite stores NaN as NULL")
    value = f"'{number}'::float8" if planted.is_postgres() else {"Infinity": "9e999", "1e308": "1e308"}[number]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE scheduler_app_job SET timeout = {value}")
        cursor.execute(f"UPDATE scheduler_app_queue SET rate_period = {value}")
        cursor.execute(f"UPDATE scheduler_app_worker SET lease_seconds = {value}")
        cursor.execute(
            f"UPDATE scheduler_app_rollup SET lag = {value}, run_max = {value}, wait_sum = {value}, run_sum = {value}"
        )
        cursor.execute(f"UPDATE scheduler_app_counter SET run_max = {value}, wait_sum = {value}, run_sum = {value}")
    assert planted.visit(admin_client_, planted.pages(jobs)) == []
