"""Every API endpoint reads any stored row without a 500, in any time zone (invariant 13).

The rows are those of ``tests/planted.py``, written around the service.
And the times a request may set are those every zone can show: a job at
9999-12-31T23:59:59Z was year 10000 in Asia/Tokyo, a 500 on every list.
"""

from datetime import datetime

import pytest
from django.test import override_settings

from scheduler_app.models import Job, Worker
from scheduler_app.sql.readable import END_OF_TIME, START_OF_TIME
from tests import planted
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db


def act(client, jobs):
    """Cancel, retry and reschedule every job; return the statuses of the answers."""
    client.raise_request_exception = False
    statuses = set()
    for job in jobs.values():
        statuses.add(client.post(f"/api/jobs/{job.pk}/cancel/").status_code)
        statuses.add(client.post(f"/api/jobs/{job.pk}/retry/").status_code)
        statuses.add(client.patch(f"/api/jobs/{job.pk}/", {"priority": 5}, format="json").status_code)
    return statuses


@pytest.mark.parametrize("value, zone", planted.times())
def test_times_no_zone_or_no_python_can_hold(api, value, zone):
    jobs = planted.world()
    planted.plant_time(value)
    with override_settings(TIME_ZONE=zone):
        assert planted.visit(api, planted.api_urls(jobs)) == []
        assert act(api, jobs) <= {200, 409}
        assert planted.visit(api, ["/api/jobs/"]) == []


@pytest.mark.parametrize("zone", ["Asia/Tokyo", "Pacific/Kiritimati", "America/New_York", "Etc/GMT+12"])
def test_the_last_and_first_instants_are_shown_in_utc_where_the_zone_has_no_such_date(api, zone):
    jobs = planted.world()
    planted.plant_time(planted.EDGE_TIMES[0][0], models=[Job], columns=["execute_at"])
    planted.plant_time(planted.EDGE_TIMES[1][0], models=[Job], columns=["finished_at"])
    with override_settings(TIME_ZONE=zone):
        shown = api.get(f"/api/jobs/{jobs['failed'].pk}/").json()
        listed = api.get("/api/jobs/").json()["results"]
    # In the zone where it has a date there, else in UTC: the same instant either way.
    assert parse(shown["execute_at"]) == END_OF_TIME and parse(shown["finished_at"]) == START_OF_TIME
    assert {job["execute_at"] for job in listed} == {shown["execute_at"]}


def parse(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- the example: refused where it was stored --------------------------------


@override_settings(TIME_ZONE="Asia/Tokyo")
@pytest.mark.parametrize(
    "execute_at, message",
    [
        ("9999-12-31T23:59:59Z", "Must be no later than 9999-12-30T23:59:59Z."),
        ("9999-12-31T00:00:00Z", "Must be no later than 9999-12-30T23:59:59Z."),
        ("0001-01-01T00:00:00Z", "Must be no earlier than 0001-01-02T00:00:00Z."),
        ("0001-01-01T23:59:59.999999Z", "Must be no earlier than 0001-01-02T00:00:00Z."),
    ],
)
def test_a_time_some_zone_cannot_show_is_refused(api, execute_at, message):
    response = api.post("/api/jobs/", {"task": ADD, "args": [1, 2], "execute_at": execute_at}, format="json")
    assert response.status_code == 400, response.content
    assert response.json() == {"execute_at": [message]}
    bulk = api.post(
        "/api/jobs/bulk/", {"jobs": [{"task": ADD, "args": [1, 2], "execute_at": execute_at}]}, format="json"
    )
    assert bulk.status_code == 400
    assert not Job.objects.exists()


@pytest.mark.parametrize("zone", ["Asia/Tokyo", "Pacific/Kiritimati", "America/New_York", "Etc/GMT+12", "UTC"])
def test_the_bounds_themselves_are_accepted_and_shown_in_any_zone(api, zone):
    with override_settings(TIME_ZONE=zone):
        late = api.post(
            "/api/jobs/", {"task": ADD, "args": [1, 2], "execute_at": "9999-12-30T23:59:59Z"}, format="json"
        )
        early = api.post(
            "/api/jobs/", {"task": ADD, "args": [1, 2], "execute_at": "0001-01-02T00:00:00Z"}, format="json"
        )
        assert late.status_code == early.status_code == 201, (late.content, early.content)
        assert api.get("/api/jobs/").status_code == 200
        assert api.post(f"/api/jobs/{late.json()['id']}/cancel/").status_code == 200
    patch = api.patch(f"/api/jobs/{early.json()['id']}/", {"execute_at": "9999-12-31T00:00:00Z"}, format="json")
    assert patch.status_code == 400
    assert patch.json() == {"execute_at": ["Must be no later than 9999-12-30T23:59:59Z."]}


def test_schedule_times_are_held_to_the_same_bounds(api):
    body = {"name": "s", "task": ADD, "args": [1, 2], "cron": "0 0 * * *"}
    late = api.post("/api/schedules/", {**body, "end_at": "9999-12-31T12:00:00Z"}, format="json")
    assert late.status_code == 400 and late.json() == {"end_at": ["Must be no later than 9999-12-30T23:59:59Z."]}
    early = api.post("/api/schedules/", {**body, "start_at": "0001-01-01T12:00:00Z"}, format="json")
    assert early.status_code == 400 and early.json() == {"start_at": ["Must be no earlier than 0001-01-02T00:00:00Z."]}


# -- progress ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stored, shown",
    [
        ({"current": "3", "total": "10", "message": ""}, {"current": None, "total": None, "message": ""}),
        ({"current": None, "total": 10, "message": "m"}, {"current": None, "total": 10, "message": "m"}),
        ({"current": 11, "total": 10}, {"current": 11, "total": 10, "message": ""}),
        ({"current": -1, "total": 1e308, "message": 7}, {"current": None, "total": None, "message": ""}),
        ({"current": 10**30, "total": True}, {"current": None, "total": None, "message": ""}),
        ({"message": "x" * 5000}, {"current": None, "total": None, "message": "x" * 1000}),
    ],
)
def test_stored_progress_is_read_by_the_one_rule(api, stored, shown):
    jobs = planted.world()
    Job.objects.filter(pk=jobs["running"].pk).update(progress=stored)
    got = api.get(f"/api/jobs/{jobs['running'].pk}/").json()["progress"]
    assert {k: got[k] for k in shown} == shown
    assert planted.visit(api, planted.api_urls(jobs)) == []


# -- text no document can encode (SQLite: PostgreSQL refuses to store it) --------------


def test_lone_surrogates_and_nul_in_json_read_as_replacement_characters(api):
    jobs = planted.world()
    if planted.is_postgres():
        pytest.skip("jsonb refuses \\udcff and \\u0000 escapes")
    failed = jobs["failed"].pk
    planted.plant(
        Job,
        failed,
        errors='[{"message": "bad \\udcff", "exception_class": "\\u0000"}]',
        args='["\\udfff"]',
        result='{"\\ud800": "\\udcff \\ud83d\\ude00"}',
    )
    planted.plant(Worker, planted.WORKER, queues='["\\udcff"]', slots='{"\\udcff": 2}')
    assert planted.visit(api, planted.api_urls(jobs)) == []
    got = api.get(f"/api/jobs/{failed}/").json()
    assert got["errors"] == [{"message": "bad \ufffd", "exception_class": "\ufffd"}]
    assert got["result"] == {"\ufffd": "\ufffd \U0001f600"}  # a pair escaped as two halves is one character
    assert got["args"] == ["\ufffd"]


def test_text_that_is_not_utf8(api):
    jobs = planted.world()
    if planted.is_postgres():
        pytest.skip("PostgreSQL stores no invalid UTF-8")
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("UPDATE scheduler_app_job SET task = CAST(X'61FF00' AS TEXT), queue = CAST(X'FE' AS TEXT)")
        cursor.execute("UPDATE scheduler_app_joblog SET message = CAST(X'FF' AS TEXT), logger = CAST(X'00FF' AS TEXT)")
        cursor.execute("UPDATE scheduler_app_worker SET id = CAST(X'77FF' AS TEXT) WHERE pid = 2")
    assert planted.visit(api, planted.api_urls(jobs)) == []
    assert api.get(f"/api/jobs/{jobs['failed'].pk}/").json()["task"] == "a\ufffd\x00"


# -- HEAD ------------------------------------------------------------------------------


def test_every_get_answers_head_too(api):
    jobs = planted.world()
    api.raise_request_exception = False
    for url in [*planted.api_urls(jobs), "/api/", "/api/schema/"]:
        response = api.head(url)
        assert response.status_code == 200, (url, response.status_code)
        assert response.content == b""


# -- text in a URL that no query can use -------------------------------------------------

NUL_URLS = [
    "/api/jobs/%00/",
    "/api/jobs/1%00/",
    "/api/jobs/%00/logs/",
    "/api/jobs/?queue=%00",
    "/api/jobs/?task=a%00",
    "/api/jobs/?search=%00",
    "/api/jobs/?ordering=%00",
    "/api/jobs/?ordering=execute_at,%00",
    "/api/jobs/?status=%00",
    "/api/jobs/?page=%00",
    "/api/jobs/?page_size=%00",
    "/api/jobs/?execute_after=%00",
    "/api/jobs/1/logs/?attempt=%00",
    "/api/queues/%00/",
    "/api/queues/a%00b/",
    "/api/schedules/%00/",
    "/api/schedules/?search=%00",
    "/api/stats/history/?queue=%00",
    "/api/stats/history/?task=%00",
    "/api/stats/history/?minutes=%00",
    "/api/workers/?page=%00",
    "/api/%00/",
]


@pytest.mark.parametrize("url", NUL_URLS)
def test_nul_in_a_lookup_or_a_query_parameter_is_a_400_or_a_404(api, url):
    planted.world()
    api.raise_request_exception = False
    assert api.get(url).status_code in (200, 400, 404), url
    for action in ("cancel", "retry", "pause", "resume"):
        if url in ("/api/jobs/%00/", "/api/queues/%00/"):
            assert api.post(f"{url}{action}/").status_code in (400, 404, 405)


# -- JSON of another shape than the service writes ---------------------------------------


@pytest.mark.parametrize("errors", ["oops", {"message": "x"}, [1, None], [{"message": 5, "attempt": {}}]])
@pytest.mark.parametrize(
    "slots, queues", [([1, 2], "abc"), ({"*": "x"}, [1, None]), ({"default": -1, "slow": 1e300}, {"a": 1})]
)
def test_json_of_any_shape(api, errors, slots, queues):
    jobs = planted.world()
    Job.objects.update(errors=errors)
    Worker.objects.update(slots=slots, queues=queues)
    assert planted.visit(api, planted.api_urls(jobs)) == []


# -- numbers JSON has no words for -----------------------------------------------------


@pytest.mark.parametrize("number", ["Infinity", "NaN", "1e308"])
def test_floats_that_are_not_numbers_json_can_write(api, number):
    """PostgreSQL's float8 holds NaN and Infinity (and the check constraints' ``> 0`` lets them by); SQLite holds Infinity."""
    from django.db import connection

    jobs = planted.world()
    if not planted.is_postgres() and number == "NaN":
        pytest.skip("SQLite stores NaN as NULL")
    value = (
        {"Infinity": "9e999", "NaN": "0", "1e308": "1e308"}[number]
        if not planted.is_postgres()
        else f"'{number}'::float8"
    )
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE scheduler_app_job SET timeout = {value}")
        cursor.execute(f"UPDATE scheduler_app_queue SET rate_period = {value}")
        cursor.execute(f"UPDATE scheduler_app_worker SET lease_seconds = {value}")
        cursor.execute(f"UPDATE scheduler_app_rollup SET lag = {value}, run_max = {value}, wait_sum = {value}")
    assert planted.visit(api, planted.api_urls(jobs)) == []
