"""GET /api/jobs/: every filter, ordering and their errors."""

from datetime import UTC, datetime, timedelta

import pytest

from scheduler_app.models import Job
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def ids(response):
    assert response.status_code == 200, response.content
    return [j["id"] for j in response.json()["results"]]


@pytest.fixture
def jobs(enqueue_job, set_status):
    """Five jobs with distinct status, queue, task, priority, time and key."""
    a = enqueue_job(ADD, priority=-50, queue="default", execute_at=T0, unique_key="alpha-1")
    b = enqueue_job(ADD, priority=0, queue="slow", execute_at=T0 + timedelta(hours=1), unique_key="beta-2")
    c = enqueue_job("tests.testapp.tasks.important", priority=10, execute_at=T0 + timedelta(hours=2))
    d = enqueue_job("tests.testapp.tasks.boom", priority=50, execute_at=T0 + timedelta(hours=3))
    e = enqueue_job("tests.testapp.tasks.noop", priority=100, execute_at=T0 + timedelta(hours=4))
    set_status(b, "running")
    set_status(c, "succeeded", finished_at=T0 + timedelta(days=2))
    set_status(d, "failed", finished_at=T0 + timedelta(days=1))
    set_status(e, "cancelled", finished_at=T0 + timedelta(days=3))
    return [Job.objects.get(pk=j.pk) for j in (a, b, c, d, e)]


def test_default_order_is_newest_first(api, jobs):
    assert ids(api.get("/api/jobs/")) == [j.pk for j in reversed(jobs)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status=pending", [0]),
        ("status=failed", [3]),
        ("status=pending,running", [1, 0]),
        ("status=succeeded,failed,cancelled", [4, 3, 2]),
        ("queue=slow", [1]),
        ("queue=other", [2]),
        ("queue=nope", []),
        (f"task={ADD}", [1, 0]),
        ("task=tests.testapp.tasks.boom", [3]),
        ("priority_min=10", [4, 3, 2]),
        ("priority_max=0", [1, 0]),
        ("priority_min=0&priority_max=50", [3, 2, 1]),
        ("priority_min=-100&priority_max=100", [4, 3, 2, 1, 0]),
        ("execute_after=2030-01-01T02:00:00%2B00:00", [4, 3, 2]),
        ("execute_before=2030-01-01T01:00:00Z", [1, 0]),
        # 03:00+02:00 is 01:00 UTC.
        ("execute_after=2030-01-01T03:00:00%2B02:00&execute_before=2030-01-01T03:00:00Z", [3, 2, 1]),
        ("search=alpha", [0]),
        ("search=BETA", [1]),
        ("search=important", [2]),
        ("search=testapp.tasks", [4, 3, 2, 1, 0]),
        ("search=zzz", []),
        ("status=pending,running&queue=default", [0]),
    ],
)
def test_filters(api, jobs, query, expected):
    assert ids(api.get(f"/api/jobs/?{query}")) == [jobs[i].pk for i in expected]


def test_search_matches_the_id(api, jobs):
    target = jobs[2]
    assert target.pk in ids(api.get(f"/api/jobs/?search={target.pk}"))
    assert ids(api.get(f"/api/jobs/?search={2**70}")) == []


@pytest.mark.parametrize(
    ("ordering", "expected"),
    [
        ("id", [0, 1, 2, 3, 4]),
        ("-id", [4, 3, 2, 1, 0]),
        ("execute_at", [0, 1, 2, 3, 4]),
        ("-execute_at", [4, 3, 2, 1, 0]),
        ("priority", [0, 1, 2, 3, 4]),
        ("-priority", [4, 3, 2, 1, 0]),
        ("created_at", [0, 1, 2, 3, 4]),
        ("-created_at", [4, 3, 2, 1, 0]),
    ],
)
def test_ordering(api, jobs, ordering, expected):
    assert ids(api.get(f"/api/jobs/?ordering={ordering}")) == [jobs[i].pk for i in expected]


@pytest.mark.parametrize("ordering", ["", ",", "priority,", ",,priority"])
def test_empty_ordering_items_are_ignored(api, jobs, ordering):
    expected = [j.pk for j in reversed(jobs)] if "priority" not in ordering else [j.pk for j in jobs]
    assert ids(api.get(f"/api/jobs/?ordering={ordering}")) == expected


def test_ordering_by_finished_at(api, jobs):
    got = ids(api.get("/api/jobs/?status=succeeded,failed,cancelled&ordering=finished_at"))
    assert got == [jobs[3].pk, jobs[2].pk, jobs[4].pk]
    got = ids(api.get("/api/jobs/?status=succeeded,failed,cancelled&ordering=-finished_at"))
    assert got == [jobs[4].pk, jobs[2].pk, jobs[3].pk]


def test_ordering_ties_break_by_id(api, enqueue_job):
    made = [enqueue_job(priority=5) for _ in range(4)]
    assert ids(api.get("/api/jobs/?ordering=priority")) == [j.pk for j in made]
    assert ids(api.get("/api/jobs/?ordering=-priority")) == [j.pk for j in reversed(made)]


def test_two_orderings(api, enqueue_job):
    a = enqueue_job(priority=1, execute_at=T0 + timedelta(hours=1))
    b = enqueue_job(priority=1, execute_at=T0)
    c = enqueue_job(priority=2, execute_at=T0)
    assert ids(api.get("/api/jobs/?ordering=-priority,execute_at")) == [c.pk, b.pk, a.pk]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("status=done", "status"),
        ("status=pending,done", "status"),
        ("status=PENDING", "status"),
        ("priority_min=high", "priority_min"),
        ("priority_min=1.5", "priority_min"),
        ("priority_max=101", "priority_max"),
        ("priority_min=-101", "priority_min"),
        (f"priority_min={10**30}", "priority_min"),
        ("execute_after=yesterday", "execute_after"),
        ("execute_after=2030-01-01T00:00:00", "execute_after"),
        ("execute_before=2030-01-01", "execute_before"),
        ("ordering=status", "ordering"),
        ("ordering=-task", "ordering"),
        ("task=%00", "task"),
        ("queue=" + "q" * 65, "queue"),
        ("search=" + "s" * 256, "search"),
        ("page_size=0", "page_size"),
        ("page_size=501", "page_size"),
        ("page_size=ten", "page_size"),
    ],
)
def test_bad_filter_is_400_naming_it(api, jobs, query, field):
    response = api.get(f"/api/jobs/?{query}")
    assert response.status_code == 400, response.content
    assert field in response.json()


@pytest.mark.parametrize(
    "query, found",
    [
        ("execute_before=9999-12-31T23:59:59-05:00", 5),
        ("execute_after=0001-01-01T00:00:00%2B05:00", 5),
        ("execute_after=9999-12-31T23:59:59-05:00", 0),
        ("execute_before=0001-01-01T00:00:00%2B05:00", 0),
    ],
)
def test_bounds_past_the_representable_range_are_the_ends_of_time(api, jobs, query, found):
    """Valid ISO 8601 times that UTC cannot hold: a bound before or after every time, not a 400."""
    assert len(ids(api.get(f"/api/jobs/?{query}"))) == found


def test_naive_filter_message(api, jobs):
    response = api.get("/api/jobs/?execute_after=2030-01-01T00:00:00")
    assert "offset" in response.json()["execute_after"][0]


def test_unknown_status_message_names_it(api, jobs):
    response = api.get("/api/jobs/?status=pending,done")
    assert "done" in response.json()["status"][0]


def test_unknown_query_parameters_are_ignored(api, jobs):
    assert len(ids(api.get("/api/jobs/?colour=blue"))) == 5


def test_filters_do_not_apply_to_a_single_job(api, jobs):
    response = api.get(f"/api/jobs/{jobs[0].pk}/?status=failed")
    assert response.status_code == 200


def test_an_empty_parameter_counts_as_not_given(api, jobs):
    """The schema says allowEmptyValue for every query parameter; each one honours it."""
    names = [
        "status",
        "queue",
        "task",
        "priority_min",
        "priority_max",
        "execute_after",
        "execute_before",
        "depends_on",
        "schedule",
        "search",
        "ordering",
        "page",
        "page_size",
        "tag",
        "created_after",
        "created_before",
        "finished_after",
        "finished_before",
    ]
    response = api.get("/api/jobs/?" + "&".join(f"{name}=" for name in names))
    assert response.status_code == 200, response.content
    assert len(response.json()["results"]) == 5
    schema = api.get("/api/schema/?format=json").json()
    parameters = schema["paths"]["/api/jobs/"]["get"]["parameters"]
    assert {p["name"] for p in parameters if p.get("allowEmptyValue")} == set(names)


FORMAT_LIKE = ["%s", "%(value)s", "%", "100%", "%00", "{}", "{0}"]


@pytest.mark.parametrize("value", FORMAT_LIKE)
def test_text_that_looks_like_a_format_string_is_never_a_500(api, jobs, value):
    """Every parameter of the job list, and the bulk actions' filter (one implementation), with %-placeholders."""
    from scheduler_app.api.filters import JobFilter

    for name in JobFilter.base_filters:
        response = api.get("/api/jobs/", {name: value})
        assert response.status_code in (200, 400), (name, value, response.status_code)
        for action in ("cancel", "retry"):
            response = api.post(f"/api/jobs/{action}/", {"filter": {name: value}}, format="json")
            assert response.status_code in (200, 400), (action, name, value, response.status_code)


def test_a_bad_tag_is_a_400_that_quotes_it(api, jobs):
    response = api.get("/api/jobs/", {"tag": "%s"})
    assert response.status_code == 400 and "%s" in str(response.json())


@pytest.mark.parametrize("field", ["queue", "search", "task", "tag", "unique_key"])
def test_a_bulk_filter_with_a_lone_surrogate_is_a_400(api, jobs, field):
    """A JSON body can carry "\\udcff" (a query string cannot): refused, nothing changed."""
    from scheduler_app.api.filters import FILTER_KEYS

    if field not in FILTER_KEYS:
        pytest.skip(f"{field} is not a filter of the list")
    body = '{"filter": {"%s": %s}}' % (field, '["\\udcff"]' if field == "tag" else '"\\udcff"')
    before = sorted(Job.objects.values_list("pk", "status"))
    response = api.post("/api/jobs/cancel/", data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"filter": {field: ["Must be valid Unicode text (no lone surrogate)."]}}
    assert sorted(Job.objects.values_list("pk", "status")) == before
