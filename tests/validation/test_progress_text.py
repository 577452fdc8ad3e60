"""The progress text (``validation.progress``): the numbers, and the message only where it adds to them."""

import pytest

from scheduler_app.validation import progress


def shown(current, total=None, message=""):
    return progress.shown({"current": current, "total": total, "message": message})


@pytest.mark.parametrize(
    ("current", "total", "message", "text"),
    [
        (116, 1200, "step 116 of 1200", "116/1200"),  # the issue's: said twice before
        (116, 1200, "116/1200 items done", "116/1200"),
        (116, 1200, "10%", "116/1200"),  # the percent is no news either
        (116, 1200, "Step 116 of 1200 done.", "116/1200"),
        (116, 1200, "", "116/1200"),
        (116, 1200, "done", "116/1200"),
        (116, 1200, "row 116 of 1200", "row 116 of 1200"),  # the numbers in its own words: alone
        (116, 1200, "importing invoices", "116/1200 · importing invoices"),
        (116, 1200, "step 116 of 1200, 3 failed", "step 116 of 1200, 3 failed"),
        (116, None, "step 116", "116"),
        (116, None, "reading", "116 · reading"),
        (None, 1200, "warming up", "?/1200 · warming up"),
        (None, None, "warming up", "warming up"),
        (2.5, 10.0, "", "2.5/10"),
        (3.0, 4, "3 of 4", "3/4"),
    ],
)
def test_the_text_never_repeats_the_numbers(current, total, message, text):
    assert shown(current, total, message)["text"] == text


def test_nothing_stored_is_no_text():
    assert progress.shown(None) is None and progress.text(None) == ""


def test_every_page_says_the_same(api, client, superuser, job_row):
    from scheduler_app.models import JobStatus

    job = job_row(JobStatus.RUNNING, progress={"current": 116, "total": 1200, "message": "step 116 of 1200"})
    assert api.get(f"/api/jobs/{job.pk}/").json()["progress"]["text"] == "116/1200"
    client.force_login(superuser)
    page = client.get(f"/admin/scheduler_app/job/{job.pk}/change/").content.decode()
    assert "116/1200" in page and "step 116 of 1200" not in page
    data = client.get("/admin/scheduler_app/dashboard/data/").json()
    assert data["running"][0]["progress"]["text"] == "116/1200"
    assert "116/1200" in data["html"]["running"]
