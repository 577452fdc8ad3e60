"""The add-job form: the zone of its date boxes, dependencies (ids, with the raw-id lookup) and tags."""

import pytest
from django.urls import reverse

from scheduler_app.models import Job, JobStatus
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db

ADD_URL = reverse("admin:scheduler_app_job_add")


def post(client, **fields):
    return client.post(ADD_URL, {"task": ADD, "args": "[1, 2]", "kwargs": "{}", **fields})


def test_the_form_names_the_zone_of_its_date_boxes_and_offers_dependencies_and_tags(admin_client_, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    html = admin_client_.get(ADD_URL).content.decode()
    assert "In Europe/Berlin (the site&#x27;s time zone)." in html or "In Europe/Berlin (the site's time zone)." in html
    assert 'name="depends_on"' in html and 'class="vManyToManyRawIdAdminField"' in html
    assert 'class="related-lookup" id="lookup_id_depends_on"' in html and "?_to_field=id" in html
    assert 'name="tags"' in html


def test_a_job_made_with_dependencies_and_tags_waits_for_them(admin_client_, job_row):
    first, second = job_row(), job_row()
    response = post(admin_client_, depends_on=f"{first.pk}, {second.pk}", tags="billing, nightly, billing")
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.latest("pk")
    assert job.status == JobStatus.WAITING and job.dependencies_left == 2
    assert job.tags == ["billing", "nightly"]


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"depends_on": "12, x"}, "depends_on", "Must be a list of at most"),
        ({"depends_on": "999999"}, "depends_on", "999999"),
        ({"tags": "ok, not a tag!"}, "tags", "'not a tag!' is not a tag"),
        ({"tags": ", ".join(f"t{i}" for i in range(21))}, "tags", "At most 20 tags; 21 given."),
    ],
)
def test_bad_dependencies_and_tags_are_inline_errors(admin_client_, fields, field, message):
    response = post(admin_client_, **fields)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors and message in " ".join(errors[field]), errors
    assert Job.objects.count() == 0


def test_the_job_list_opens_as_a_lookup_popup(admin_client_, job_row):
    job = job_row()
    response = admin_client_.get(reverse("admin:scheduler_app_job_changelist"), {"_to_field": "id", "_popup": "1"})
    assert response.status_code == 200
    assert f'data-popup-opener="{job.pk}"' in response.content.decode()
