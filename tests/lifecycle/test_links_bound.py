"""Issue 34: a request holds at most LINKS_PER_REQUEST_MAX dependencies; one more is a clear refusal, nothing made.

1,000 jobs each depending on all earlier ones (499,500 edges) took 25-43 s
to create. The bound is checked once, in ``enqueue_many`` (the API's bulk
and workflow endpoints, the admin, the canvas and code alike); the edges
are inserted by one statement (``sql.insert_dependencies``).
"""

import pytest
from django.core.exceptions import ValidationError

from scheduler_app import lifecycle
from scheduler_app.lifecycle import creation
from scheduler_app.models import Job, JobDependency
from scheduler_app.vocabulary.bounds import LINKS_PER_REQUEST_MAX
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db

BOUND = 10


@pytest.fixture
def small_bound(monkeypatch):
    monkeypatch.setattr(creation, "LINKS_PER_REQUEST_MAX", BOUND)


def all_to_all(n, *, existing=()):
    """``n`` jobs, each after every earlier one (and after the ``existing`` ids): n(n-1)/2 + n*len(existing) edges."""
    return [
        {"task": ADD, "args": [i, i], "depends_on_index": list(range(i)), "depends_on": list(existing)}
        for i in range(n)
    ]


def test_the_bound_is_sane():
    assert 10_000 <= LINKS_PER_REQUEST_MAX < 499_500


def test_a_request_at_the_bound_is_made_with_every_edge(small_bound):
    first = lifecycle.enqueue(ADD, [0, 0])[0]
    jobs = lifecycle.enqueue_many(all_to_all(4, existing=[first.pk]))  # 6 + 4 = 10 edges
    assert JobDependency.objects.filter(job__in=jobs).count() == BOUND
    assert set(JobDependency.objects.filter(job=jobs[3]).values_list("depends_on", flat=True)) == {
        first.pk,
        *(j.pk for j in jobs[:3]),
    }


def test_one_edge_more_is_refused_and_nothing_is_made(small_bound):
    first = lifecycle.enqueue(ADD, [0, 0])[0]
    before = Job.objects.count()
    at_bound = all_to_all(4, existing=[first.pk])
    for specs in (
        all_to_all(5) + [{"task": ADD, "args": [1, 1], "depends_on_index": [0]}],
        [*at_bound, {"task": ADD, "args": [1, 1], "depends_on": [first.pk]}],
    ):
        with pytest.raises(ValidationError) as refused:
            lifecycle.enqueue_many(specs)
        assert f"At most {BOUND} dependencies" in str(refused.value.message_dict["jobs"])
    assert Job.objects.count() == before


def test_the_api_answers_400_naming_the_bound(small_bound, api):
    response = api.post("/api/jobs/bulk/", {"jobs": all_to_all(6)}, format="json")
    assert response.status_code == 400, response.content
    assert f"At most {BOUND} dependencies" in response.json()["jobs"][0]
    assert not Job.objects.exists()


def test_a_canvas_past_the_bound_is_refused(small_bound):
    from scheduler_app.workflows import chord, group, step

    with pytest.raises(ValidationError):
        chord(group(*(step(ADD, i, i) for i in range(BOUND + 1))), step("tests.testapp.tasks.noop")).enqueue()
    assert not Job.objects.exists()
