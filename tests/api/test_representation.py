"""The job and schedule representations' fast paths give exactly what DRF's generic ones give."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework import serializers
from rest_framework.test import APIRequestFactory

from scheduler_app import lifecycle, schedules
from scheduler_app.api.fields import DirectAttributesMixin, IdentityUrlField
from scheduler_app.api.schedules import ScheduleSerializer
from scheduler_app.api.serializers import JobSerializer
from scheduler_app.models import Job, Schedule

pytestmark = pytest.mark.django_db
ADD = "tests.testapp.tasks.add"


def generic(serializer, instance):
    """DRF's own to_representation, and HyperlinkedIdentityField's own URLs."""
    data = super(DirectAttributesMixin, serializer).to_representation(instance)
    for name, field in serializer.fields.items():
        if isinstance(field, IdentityUrlField):
            data[name] = serializers.HyperlinkedIdentityField.get_url(
                field, instance, field.view_name, serializer.context["request"], None
            )
    return data


def jobs(user):
    schedule = schedules.create(name="s", task=ADD, args=[1, 2], interval_seconds=60)
    plain, _ = lifecycle.enqueue(ADD, [1, 2])
    later, _ = lifecycle.enqueue(
        ADD,
        [3, 4],
        execute_at=timezone.now() + timedelta(days=2, microseconds=7),
        priority=-5,
        queue="slow",
        timeout=2.5,
        max_attempts=7,
        unique_key="k",
        created_by=user,
        schedule=schedule,
    )
    child, _ = lifecycle.enqueue(ADD, [5, 6], depends_on=[plain.pk])
    failed, _ = lifecycle.enqueue(ADD, [7, 8])
    # Late from the start: a due job turning late between two serializations
    # (a loaded machine) would change its late_reason between them.
    Job.objects.filter(pk=plain.pk).update(execute_at=timezone.now() - timedelta(hours=1))
    Job.objects.filter(pk=failed.pk).update(
        status="failed",
        attempts=1,
        errors=[{"exception_class": "builtins.ValueError", "traceback": "x"}],
        finished_at=timezone.now(),
        result={"partial": [1, None]},
        progress={"current": 3, "total": None, "message": "m", "updated_at": timezone.now().isoformat()},
    )
    return [Job.objects.get(pk=j.pk) for j in (plain, later, child, failed)]


@pytest.mark.parametrize("secure", [False, True], ids=["http", "https"])
def test_a_job_comes_out_as_drf_would_write_it(staff_user, secure, settings):
    settings.ALLOWED_HOSTS = ["example.test"]
    request = APIRequestFactory().get("/api/jobs/", secure=secure, HTTP_HOST="example.test:8443")
    for job in jobs(staff_user):
        serializer = JobSerializer(job, context={"request": request})
        assert serializer.data == generic(serializer, job)
    many = JobSerializer(Job.objects.order_by("pk"), many=True, context={"request": request}).data
    one_by_one = [JobSerializer(j, context={"request": request}).data for j in Job.objects.order_by("pk")]
    assert many == one_by_one and many[0]["url"].startswith(("https" if secure else "http") + "://example.test:8443/")


def test_a_schedule_comes_out_as_drf_would_write_it():
    schedules.create(name="s", task=ADD, args=[1, 2], interval_seconds=60)
    request = APIRequestFactory().get("/api/schedules/")
    for schedule in Schedule.objects.all():
        serializer = ScheduleSerializer(schedule, context={"request": request})
        assert serializer.data == generic(serializer, schedule)


def test_urls_follow_the_request_they_are_written_for(settings):
    settings.ALLOWED_HOSTS = ["a.test", "b.test"]
    job, _ = lifecycle.enqueue(ADD, [1, 2])
    serializer = JobSerializer(job)
    field = serializer.fields["url"]
    for host in ["a.test", "b.test"]:
        request = APIRequestFactory().get("/", HTTP_HOST=host)
        assert field.get_url(job, field.view_name, request, None) == f"http://{host}/api/jobs/{job.pk}/"


BODIES = [
    {"task": ADD},
    {"task": ADD, "args": [1, 2], "priority": 5, "queue": "slow", "execute_at": "2030-01-01T00:00:00+00:00"},
    {"args": [1]},  # no task
    {"task": None, "priority": None, "queue": None},
    {"task": "nope", "priority": 1000, "delay": -1, "execute_at": 5, "timeout": "x", "max_attempts": True},
    {"task": ADD, "unknown": 1, "args": "not a list"},
    {"task": ADD, "depends_on": [1, "x"], "unique_key": "", "unique_for": 0, "on_dependency_failure": "maybe"},
    {},
]


@pytest.mark.parametrize("body", BODIES + [[], "text", None, 3])
def test_a_job_body_validates_as_drf_would_validate_it(body):
    from scheduler_app.api.serializers import BulkJobSerializer, JobCreateSerializer

    for cls in (JobCreateSerializer, BulkJobSerializer):

        def outcome(fast, cls=cls):
            serializer = cls(data=body)
            if not fast:  # DRF's own loop over every field
                serializer.__dict__["_present_plan"] = ()
            valid = serializer.is_valid()
            if fast and isinstance(body, dict):
                assert serializer.__dict__["_present_plan"]  # the fast path ran
            return valid, serializer.errors if not valid else serializer.validated_data

        assert outcome(True) == outcome(False)


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/New_York"])
def test_datetimes_follow_the_time_zone_active_when_the_serializer_is_made(zone):
    """The job representation asks for the active time zone once per serializer (once per request),
    and writes every datetime as DRF's own DateTimeField would under that zone."""
    job, _ = lifecycle.enqueue(ADD, [1, 2], execute_at=timezone.now() + timedelta(hours=3))
    job = Job.objects.get(pk=job.pk)
    request = APIRequestFactory().get("/api/jobs/")
    with timezone.override(zone):
        data = JobSerializer([job], many=True, context={"request": request}).data[0]
        plain = serializers.DateTimeField()
        for name in ("execute_at", "created_at", "updated_at"):
            assert data[name] == plain.to_representation(getattr(job, name))
    if zone == "Asia/Kolkata":
        assert data["execute_at"].endswith("+05:30")


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
def test_jobs_fresh_from_a_bulk_enqueue_come_out_as_drf_would_write_them(staff_user, zone):
    """What POST /api/jobs/bulk/ writes: the Jobs enqueue_many built (enum statuses, the creator
    cached, datetimes as Python made them), each field's fast path against DRF's own."""
    schedule = schedules.create(name="s", task=ADD, args=[1, 2], interval_seconds=60)
    specs = [
        {"task": ADD, "args": [1, 2]},
        {
            "task": ADD,
            "args": [3, 4],
            "priority": -5,
            "queue": "slow",
            "timeout": 2.5,
            "unique_key": "u",
            "delay": 30,
            "schedule": schedule,
        },
        {"task": ADD, "args": [5, 6], "depends_on_index": [0], "on_dependency_failure": "run"},
    ]
    request = APIRequestFactory().get("/api/jobs/bulk/")
    with timezone.override(zone):
        made = lifecycle.enqueue_many(specs, created_by=staff_user)
        for created_by in (staff_user, None):
            for job in made:
                job.created_by = created_by
                serializer = JobSerializer(job, context={"request": request})
                fast, drf = serializer.data, generic(serializer, job)
                assert fast == drf
                # the same types too (a JobStatus member is written as its text); the URL is a Hyperlink either way
                assert {k: type(v) for k, v in fast.items() if k != "url"} == {
                    k: type(v) for k, v in drf.items() if k != "url"
                }
        assert JobSerializer(made[1], context={"request": request}).data["schedule"] == schedule.pk
