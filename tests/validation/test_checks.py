"""System checks (scheduler_app/checks.py): bad settings are reported at start-up, each with an id and a hint."""

from datetime import timedelta

import pytest
from django.core import checks
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse

from scheduler_app import conf
from tests.plumbing import run_manage

BACKEND = "scheduler_app.backends.SchedulerBackend"


def ids(**settings):
    with override_settings(**settings):
        found = checks.run_checks(tags=["scheduler"])
    for message in found:
        assert message.hint, message
    return sorted(m.id for m in found)


def scheduler_with(**overrides):
    from django.conf import settings

    return {"SCHEDULER": {**settings.SCHEDULER, **overrides}}


@pytest.mark.django_db
def test_the_test_settings_pass():
    assert ids() == []
    call_command("check", "--fail-level", "WARNING")


def test_a_bad_queue_name_in_the_environment_stops_manage_check():
    result = run_manage(
        "check", timeout=60, DJANGO_SETTINGS_MODULE="project.settings", SCHEDULER_QUEUES="default,slow,a/b"
    )
    assert result.returncode == 1
    assert "(scheduler_app.E001) TASKS['default']['QUEUES'] has the queue name 'a/b'" in result.stderr
    assert "HINT: Rename it to match ^[A-Za-z0-9_.-]{1,64}$" in result.stderr


@pytest.mark.parametrize("name", ["a/b", "", "x" * 65, "a b", "é", "a\n", "%2F", 3])
def test_queue_names_outside_the_pattern(name):
    assert ids(TASKS={"default": {"BACKEND": BACKEND, "QUEUES": ["default", name]}}) == ["scheduler_app.E001"]


@pytest.mark.django_db
def test_a_malformed_queue_is_no_queue_so_the_dashboard_still_works(client, superuser):
    client.force_login(superuser)
    with override_settings(TASKS={"default": {"BACKEND": BACKEND, "QUEUES": ["default", "slow", "other", "a/b"]}}):
        assert "a/b" not in conf.known_queues()
        response = client.get(reverse("admin:scheduler_app_dashboard"))
        assert response.status_code == 200


def test_no_scheduler_backend():
    assert ids(TASKS={"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}) == [
        "scheduler_app.E002"
    ]


def test_a_backend_alias_longer_than_a_job_keeps():
    long = "b" * 101
    assert ids(TASKS={"default": {"BACKEND": BACKEND}, long: {"BACKEND": BACKEND}}) == ["scheduler_app.E013"]
    assert ids(TASKS={"default": {"BACKEND": BACKEND}, "b" * 100: {"BACKEND": BACKEND}}) == []


@pytest.mark.parametrize("name", [":memory:", "file:jobs?mode=memory&cache=shared", ""])
def test_in_memory_sqlite(name):
    databases = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": name}}
    with pytest.warns(UserWarning, match="DATABASES"):
        assert ids(DATABASES=databases) == ["scheduler_app.E003"]


@pytest.mark.parametrize(
    "retention",
    [
        [],
        {"pending": timedelta(days=1)},
        {"failed": timedelta(days=-1)},
        {"failed": 86400},
        {"failed": timedelta(days=10**6)},
    ],
)
def test_retention_out_of_range(retention):
    assert ids(**scheduler_with(RETENTION=retention)) == ["scheduler_app.E004"]


@pytest.mark.parametrize(
    "key, value",
    [
        ("LEASE", 0),
        ("LEASE", -1),
        ("LEASE", "30"),
        ("LEASE", float("nan")),
        ("GRACE", -1),
        ("GRACE", True),
        ("POLL_INTERVAL", 0),
        ("POLL_INTERVAL", float("inf")),
        # Positive, but nothing once added to a time: a busy loop, leases that expire at once.
        ("POLL_INTERVAL", 5e-324),
        ("LEASE", 5e-324),
        ("FULL_SYNC_INTERVAL", 1e-9),
        ("RETRY_BACKOFF_BASE", 5e-324),
        ("HORIZON", 1e308),
        ("CONCURRENCY", 0),
        ("CONCURRENCY", 99999999999),
        ("RETRY_JITTER", 2),
        ("ARGS_MAX_BYTES", 0),
        ("ARGS_MAX_BYTES", 2**40),
        ("ARGS_MAX_BYTES", "1MB"),
        ("RESULT_MAX_BYTES", 1023),
        ("RESULT_MAX_BYTES", 1.5),
        ("DEFAULT_MAX_ATTEMPTS", 0),
        ("SYNCHRONOUS_COMMIT", "no"),
        ("SCHEDULE_CATCH_UP_MAX", 0),
    ],
)
def test_numbers_out_of_range(key, value):
    assert ids(**scheduler_with(**{key: value})) == ["scheduler_app.E005"]


@pytest.mark.parametrize(
    "key, value",
    [
        ("WEBHOOK_ALLOWED_HOSTS", "hooks.example.com"),
        ("WEBHOOK_ALLOWED_HOSTS", ["https://hooks.example.com/"]),
        ("WEBHOOK_ALLOWED_HOSTS", [None]),
        ("WEBHOOK_ALLOWED_HOSTS", ["hooks.internal:0"]),
        ("WEBHOOK_ALLOWED_HOSTS", ["hooks.internal:65536"]),
        ("WEBHOOK_ALLOWED_HOSTS", ["hooks.internal:http"]),
        ("WEBHOOK_ALLOWED_HOSTS", ["hooks.internal:"]),
        ("WEBHOOK_ALLOWED_HOSTS", ["[fd00::5"]),
        ("WEBHOOK_ALLOWED_HOSTS", ["[hooks.internal]:80"]),
        ("WEBHOOK_ALLOWED_HOSTS", ["fd00::5:8080:"]),
        ("WEBHOOK_ALLOWED_HOSTS", [" hooks.internal"]),
        ("WEBHOOK_TIMEOUT", "10"),
        ("WEBHOOK_TIMEOUT", 0),
        ("WEBHOOK_MAX_BODY", -1),
        ("WEBHOOK_MAX_BODY", 1.5),
    ],
)
def test_webhook_settings_of_the_wrong_type(key, value):
    assert ids(**scheduler_with(**{key: value})) == ["scheduler_app.E006"]


@pytest.mark.parametrize(
    "entry, message",
    [
        ("hooks.internal:99999", "'hooks.internal:99999': the port must be a number from 1 to 65535."),
        (
            "https://hooks.internal/",
            "'https://hooks.internal/' is not a host with an optional port: write e.g. 'hooks.internal', "
            "'hooks.internal:8080', '10.0.0.5:8443' or '[fd00::5]:8080' (a port from 1 to 65535; a host without "
            "one allows ports 80 and 443 only).",
        ),
    ],
)
def test_a_bad_allowed_host_is_named(entry, message):
    with override_settings(**scheduler_with(WEBHOOK_ALLOWED_HOSTS=["ok.internal", entry])):
        [error] = checks.run_checks(tags=["scheduler"])
    assert error.id == "scheduler_app.E006" and error.msg == f"SCHEDULER['WEBHOOK_ALLOWED_HOSTS']: {message}"


@pytest.mark.parametrize(
    "key, value",
    [("EMAIL_FROM_ALLOWED", "a@example.com"), ("RUN_COMMAND_ALLOWED", [""]), ("RUN_COMMAND_ALLOWED", "purgejobs")],
)
def test_other_lists(key, value):
    assert ids(**scheduler_with(**{key: value})) == ["scheduler_app.E007"]


def test_the_old_allowed_commands_setting_is_a_warning_that_names_the_new_one():
    with override_settings(**scheduler_with(ALLOWED_COMMANDS=["clearsessions", "purgejobs"])):
        [found] = checks.run_checks(tags=["scheduler"])
    assert found.id == "scheduler_app.W002"
    assert found.msg == (
        "SCHEDULER['ALLOWED_COMMANDS'] was renamed RUN_COMMAND_ALLOWED and is ignored: "
        "only what SCHEDULER['RUN_COMMAND_ALLOWED'] lists is allowed (nothing by default)."
    )
    assert "RUN_COMMAND_ALLOWED" in found.hint
    assert (
        conf.get("RUN_COMMAND_ALLOWED") == []
        and conf.DEFAULTS["ARGS_MAX_BYTES"] == conf.DEFAULTS["RESULT_MAX_BYTES"] == 1048576
    )


def test_scheduler_must_be_a_dict():
    assert ids(SCHEDULER=[("LEASE", 30)]) == ["scheduler_app.E008"]


def test_unknown_keys_are_a_warning():
    assert ids(**scheduler_with(LEASES=30)) == ["scheduler_app.W001"]


def test_good_values_pass():
    good = scheduler_with(
        LEASE=5,
        GRACE=0,
        WEBHOOK_ALLOWED_HOSTS=[
            "hooks.internal",
            "10.0.0.5",
            "hooks.internal:8080",
            "10.0.0.5:8443",
            "[fd00::5]:8080",
            "fd00::5",
        ],
        WEBHOOK_TIMEOUT=2.5,
        WEBHOOK_MAX_BODY=0,
        EMAIL_FROM_ALLOWED=["ops@example.com"],
        RUN_COMMAND_ALLOWED=["clearsessions"],
        ARGS_MAX_BYTES=1024,
        RESULT_MAX_BYTES=64 * 1024 * 1024,
        RETENTION={"succeeded": timedelta(0), "failed": timedelta(days=365)},
    )
    assert ids(**good) == []


def test_a_missing_required_app():
    from django.conf import settings

    apps = [a for a in settings.INSTALLED_APPS if a != "rest_framework.authtoken"]
    from django.apps import apps as registry

    with override_settings(INSTALLED_APPS=apps):
        found = [m for m in checks.run_checks(tags=["scheduler"]) if m.id == "scheduler_app.E010"]
    assert [m.msg for m in found] == [
        "rest_framework.authtoken is not in INSTALLED_APPS; the scheduler needs it for the API's 'Authorization: Token' keys."
    ]
    assert "Add 'rest_framework.authtoken' to INSTALLED_APPS" in found[0].hint
    assert registry.is_installed("rest_framework.authtoken")  # restored


@pytest.mark.parametrize(
    ("modules", "problem"),
    [(["json"], "is not inside an installed app"), (["tests.testapp.no_such_module"], "cannot be imported")],
)
def test_task_modules_outside_installed_apps_or_missing(modules, problem):
    with override_settings(**scheduler_with(TASK_MODULES=modules)):
        found = [m for m in checks.run_checks(tags=["scheduler"]) if m.id == "scheduler_app.E009"]
    assert len(found) == 1 and problem in found[0].msg and found[0].hint


def test_every_setting_is_declared_once_with_a_default_its_own_rule_accepts():
    from pathlib import Path

    from scheduler_app.validation.settings import DECLARED

    assert set(conf.DEFAULTS) == set(DECLARED)
    for setting in DECLARED.values():
        setting.rule.check(setting.default)  # raises if the default broke its own rule
        assert setting.doc and setting.check_id.startswith("E")
    documented = (Path(__file__).resolve().parents[2] / "README.md").read_text() + "".join(
        p.read_text() for p in (Path(__file__).resolve().parents[2] / "docs").glob("*.md")
    )
    assert [name for name in DECLARED if f"`{name}`" not in documented] == []


@pytest.mark.parametrize("value", ["9jobs", "", "a" * 64, "bad-name", 5])
def test_a_notify_channel_postgresql_cannot_listen_on_is_refused(value):
    assert ids(**scheduler_with(NOTIFY_CHANNEL=value)) == ["scheduler_app.E005"]


def test_a_project_without_the_api_errors_middleware_is_warned(settings):
    assert "scheduler_app.W003" not in [c.id for c in checks.run_checks(tags=["scheduler"])]
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if not m.endswith("APIErrorsMiddleware")]
    [found] = [c for c in checks.run_checks(tags=["scheduler"]) if c.id == "scheduler_app.W003"]
    assert "APIErrorsMiddleware" in found.hint
