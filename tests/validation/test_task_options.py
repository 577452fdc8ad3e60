"""Per-task options (@options), their precedence, signatures checked at enqueue, TASK_MODULES."""

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.tasks.exceptions import InvalidTask
from rest_framework.test import APIClient

from scheduler_app import lifecycle, options, registry
from scheduler_app.models import Job
from scheduler_app.testing import drain
from tests.testapp import tasks

pytestmark = pytest.mark.django_db

WITH_OPTIONS = "tests.testapp.tasks.with_options"


class TestPrecedence:
    def test_the_task_options_fill_the_job_row(self):
        job, _ = lifecycle.enqueue(WITH_OPTIONS, [1])
        assert (job.max_attempts, job.timeout, job.queue) == (5, 30.0, "slow")

    def test_the_jobs_own_fields_win(self):
        job, _ = lifecycle.enqueue(WITH_OPTIONS, [1], max_attempts=2, timeout=5)
        assert (job.max_attempts, job.timeout) == (2, 5.0)

    def test_the_task_options_win_over_the_backends_and_the_backends_over_settings(self, settings):
        settings.TASKS = {"default": {**settings.TASKS["default"], "OPTIONS": {"max_attempts": 7, "timeout": 60}}}
        assert tasks.with_options.enqueue(1)  # via django.tasks
        plain = tasks.add.enqueue(1, 2)
        rows = {j.task.rpartition(".")[2]: j for j in Job.objects.all()}
        assert (rows["with_options"].max_attempts, rows["with_options"].timeout) == (5, 30.0)
        assert (rows["add"].max_attempts, rows["add"].timeout) == (7, 60.0)
        assert plain.id

    def test_settings_are_the_last_default(self, settings):
        settings.SCHEDULER = {**settings.SCHEDULER, "DEFAULT_MAX_ATTEMPTS": 9}
        job, _ = lifecycle.enqueue("tests.testapp.tasks.add", [1, 2])
        assert job.max_attempts == 9 and job.timeout is None


class TestUnique:
    def test_unique_true_keys_the_task_and_its_arguments(self):
        first, created = lifecycle.enqueue(WITH_OPTIONS, [1])
        again, created_again = lifecycle.enqueue(WITH_OPTIONS, [1])
        other, created_other = lifecycle.enqueue(WITH_OPTIONS, [2])
        assert created and not created_again and again.pk == first.pk
        assert created_other and other.pk != first.pk
        assert first.unique_key.startswith(WITH_OPTIONS + ":") and len(first.unique_key) < 255

    def test_a_callable_makes_the_key(self):
        job, _ = lifecycle.enqueue("tests.testapp.tasks.per_account", [42], {"note": "a"})
        same, created = lifecycle.enqueue("tests.testapp.tasks.per_account", [42], {"note": "b"})
        assert job.unique_key == "tests.testapp.tasks.per_account:account-42"
        assert not created and same.pk == job.pk

    def test_an_explicit_unique_key_wins(self):
        job, _ = lifecycle.enqueue(WITH_OPTIONS, [1], unique_key="mine")
        assert job.unique_key == "mine"

    def test_the_api_shows_the_key_and_returns_the_duplicate_with_200(self, superuser):
        api = APIClient()
        api.force_authenticate(superuser)
        first = api.post("/api/jobs/", {"task": WITH_OPTIONS, "args": [3]}, format="json")
        again = api.post("/api/jobs/", {"task": WITH_OPTIONS, "args": [3]}, format="json")
        assert (first.status_code, again.status_code) == (201, 200)
        assert again.json()["id"] == first.json()["id"] and first.json()["unique_key"].startswith(WITH_OPTIONS)


class TestRetries:
    def test_retry_on_retries_only_the_named_exceptions(self):
        retried, _ = lifecycle.enqueue("tests.testapp.tasks.picky", ["connection"])
        refused, _ = lifecycle.enqueue("tests.testapp.tasks.picky", ["value"])
        drain()
        retried.refresh_from_db()
        refused.refresh_from_db()
        assert (retried.status, retried.attempts, len(retried.errors)) == ("failed", 4, 4)
        assert (refused.status, refused.attempts, len(refused.errors)) == ("failed", 1, 1)
        assert refused.errors[0]["exception_class"] == "builtins.ValueError"

    def test_backoff_zero_retries_at_once(self):
        from scheduler_app.runtime.wiring import retry_policy
        from scheduler_app.vocabulary.jobs import ClaimedJob

        job = ClaimedJob(
            id=1,
            task="tests.testapp.tasks.picky",
            args=["connection"],
            kwargs={},
            queue="default",
            priority=0,
            execute_at=0.0,
            attempt=1,
            max_attempts=4,
            timeout=None,
            cancel_requested=False,
            worker="w",
            last_attempted_at=None,
        )
        from datetime import UTC, datetime

        now = datetime.now(UTC)
        outcome = retry_policy().raised(job, ConnectionError("down"), now)
        assert outcome.status == "pending" and outcome.retry_at == now


class TestDeclaration:
    def test_values_are_checked_when_the_module_is_imported(self):
        with pytest.raises(ImproperlyConfigured, match="max_attempts: Must be a whole number from 1 to 100."):
            options(max_attempts=0)
        with pytest.raises(ImproperlyConfigured, match="timeout"):
            options(timeout=-1)
        with pytest.raises(ImproperlyConfigured, match="retry_on"):
            options(retry_on=("IOError",))
        with pytest.raises(ImproperlyConfigured, match="unique"):
            options(unique="yes")

    def test_the_task_list_shows_options_and_signature(self, superuser):
        api = APIClient()
        api.force_authenticate(superuser)
        listed = {t["name"]: t for t in api.get("/api/tasks/").json()}
        entry = listed[WITH_OPTIONS]
        assert entry["signature"] == "(x)"
        assert entry["options"] == {"max_attempts": 5, "timeout": 30.0, "backoff": 0.0, "unique": True}
        assert listed["tests.testapp.tasks.picky"]["options"]["retry_on"] == ["builtins.ConnectionError"]


class TestSignature:
    @pytest.mark.parametrize(
        ("args", "kwargs", "fragment"),
        [
            ([], {}, "missing a required argument: 'a'"),
            ([1, 2, 3], {}, "too many positional arguments"),
            ([1, 2], {"c": 3}, "got an unexpected keyword argument 'c'"),
            ([1, 2], {"a": 3}, "multiple values for argument 'a'"),
        ],
    )
    def test_arguments_that_do_not_bind_are_refused_at_every_entry_point(
        self, superuser, client, args, kwargs, fragment
    ):
        import json

        from django.core.management import call_command
        from django.core.management.base import CommandError

        message = f"The arguments do not match add(a, b): {fragment}."
        with pytest.raises(ValidationError) as info:
            lifecycle.enqueue("tests.testapp.tasks.add", args, kwargs)
        assert info.value.message_dict == {"args": [message]}
        api = APIClient()
        api.force_authenticate(superuser)
        response = api.post(
            "/api/jobs/", {"task": "tests.testapp.tasks.add", "args": args, "kwargs": kwargs}, format="json"
        )
        assert response.status_code == 400 and response.json() == {"args": [message]}
        client.force_login(superuser)
        form = (
            client.post(
                "/admin/scheduler_app/job/add/",
                {"task": "tests.testapp.tasks.add", "args": json.dumps(args), "kwargs": json.dumps(kwargs)},
            )
            .context["adminform"]
            .form
        )
        assert form.errors["args"] == [message]
        with pytest.raises(CommandError, match="The arguments do not match add"):
            call_command(
                "enqueue", "tests.testapp.tasks.add", "--args", json.dumps(args), "--kwargs", json.dumps(kwargs)
            )
        with pytest.raises(InvalidTask, match="The arguments do not match add"):
            tasks.add.enqueue(*args, **kwargs)
        assert Job.objects.count() == 0

    def test_a_context_task_binds_without_its_context(self):
        job, _ = lifecycle.enqueue("tests.testapp.tasks.cooperative", [], {"seconds": 1})
        assert job.pk
        with pytest.raises(ValidationError, match="cooperative"):
            lifecycle.enqueue("tests.testapp.tasks.cooperative", [1, 2])


class TestTaskModules:
    def test_a_listed_module_of_an_installed_app_is_registered(self):
        assert registry.is_registered("tests.testapp.jobs.from_another_module")
        job, _ = lifecycle.enqueue("tests.testapp.jobs.from_another_module", [21])
        assert drain() == {"succeeded": 1, "failed": 0, "cancelled": 0, "snoozed": 0}
        job.refresh_from_db()
        assert job.result == 42

    def test_a_module_outside_the_installed_apps_is_not(self, settings):
        settings.SCHEDULER = {**settings.SCHEDULER, "TASK_MODULES": ["tests.testapp.jobs", "json"]}
        assert "json" not in registry.task_modules()


class TestValidate:
    """@options(validate=...): a task's own refusals, at every entry point, as field errors."""

    def test_a_plain_message_is_the_args_fields_and_a_dict_keeps_its_fields(self):
        assert lifecycle.enqueue("tests.testapp.tasks.even", [2])[1] is True
        with pytest.raises(ValidationError) as caught:
            lifecycle.enqueue("tests.testapp.tasks.even", [3])
        assert caught.value.message_dict == {"args": ["Must be even."]}
        with pytest.raises(ValidationError) as caught:
            lifecycle.enqueue("tests.testapp.tasks.even", [2], {"note": "bad"})
        assert caught.value.message_dict == {"kwargs": ["note may not be 'bad'."]}

    def test_a_check_that_raises_is_a_field_error_not_a_crash(self):
        with pytest.raises(ValidationError) as caught:
            lifecycle.enqueue("tests.testapp.tasks.even", [2], {"broken": True})
        assert caught.value.message_dict == {
            "args": ["The task's check of its arguments failed: RuntimeError: the check itself broke"]
        }

    def test_it_runs_only_for_arguments_that_bind(self):
        with pytest.raises(ValidationError) as caught:
            lifecycle.enqueue("tests.testapp.tasks.even", [3, 4, 5, 6])
        assert "do not match even(" in caught.value.message_dict["args"][0]

    def test_the_tasks_backend_and_the_api(self, staff_user):
        with pytest.raises(InvalidTask, match="args: Must be even."):
            tasks.even.enqueue(5)
        from rest_framework.authtoken.models import Token

        from tests.plumbing import grant

        grant(staff_user, "scheduler_app.add_job")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff_user).key}")
        response = client.post("/api/jobs/", {"task": "tests.testapp.tasks.even", "args": [7]}, format="json")
        assert (response.status_code, response.json()) == (400, {"args": ["Must be even."]})
        assert not Job.objects.exists()

    def test_it_must_be_callable(self):
        with pytest.raises(ImproperlyConfigured, match="validate must be a callable"):
            options(validate="nope")
