"""The admin's search box and the API's ?search= are one rule (api.filters.search): the same jobs, both databases."""

import pytest

from scheduler_app.models import JobStatus
from tests.admin.test_job_admin import CHANGELIST, listed_ids

pytestmark = pytest.mark.django_db


def test_the_admin_finds_what_the_api_finds_in_arguments_tags_and_errors(admin_client_, api, job_row):
    found = [
        job_row(kwargs={"customer": "cust-5", "n": 1}),  # in the arguments
        job_row(args=["CUST-5"]),  # any case
        job_row(tags=["cust-5"]),  # a tag
        job_row(meta={"customer": "cust-5x"}),  # in meta
        job_row(unique_key="invoice:cust-5:2026"),
        job_row(
            JobStatus.FAILED,
            errors=[{"attempt": 1, "exception_class": "builtins.KeyError", "message": "no cust-5", "traceback": "t"}],
        ),
        job_row(kwargs={"name": "Zoë cust-5"}),  # beside non-ASCII text (SQLite's JSON escapes it)
    ]
    job_row(kwargs={"customer": "cust-6"})
    job_row(tags=["customer"])
    job_row(JobStatus.FAILED, errors=[{"attempt": 1, "message": "cust-6", "traceback": "t"}])
    # Errors are searched on failed jobs (a retrying job's are its earlier attempts').
    job_row(JobStatus.SUCCEEDED, errors=[{"attempt": 1, "message": "cust-5", "traceback": "t"}])
    expected = sorted(j.pk for j in found)
    response = api.get("/api/jobs/", {"search": "cust-5", "page_size": 100})
    assert response.status_code == 200
    assert sorted(j["id"] for j in response.json()["results"]) == expected
    assert sorted(listed_ids(admin_client_.get(CHANGELIST, {"q": "cust-5"}))) == expected
    assert sorted(listed_ids(admin_client_.get(CHANGELIST, {"q": "  cust-5 "}))) == expected


def test_odd_search_text_lists_nothing_and_never_fails(admin_client_, job_row):
    job_row(kwargs={"x": "100%_done"})
    for text in ("%", "_", "\\", "'", '"', "\x00", "a" * 5000):
        response = admin_client_.get(CHANGELIST, {"q": text})
        # NUL: the admin's own refusal of the list's parameters (?e=1)
        assert response.status_code == (302 if text == "\x00" else 200), text
    assert len(listed_ids(admin_client_.get(CHANGELIST, {"q": "100%_"}))) == 1
    assert listed_ids(admin_client_.get(CHANGELIST, {"q": "0%x"})) == []
