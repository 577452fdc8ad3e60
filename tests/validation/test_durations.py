"""Durations as people type them ("90s", "2h", "3d", "1h30m", plain seconds): one rule, every entry point.

The rule is ``validation.fields.Duration`` (pytimeparse2 reads the text,
bounded as seconds are); each entry point hands it what it receives: JSON
(the API), typed text (the admin form, the command line), Python values
(``enqueue()``, ``@options``, ``Snooze``).
"""

import io
import json
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from scheduler_app import Snooze, enqueue, options
from scheduler_app.models import Job
from scheduler_app.validation.fields import DELAY, TIMEOUT, UNIQUE_FOR, Duration
from scheduler_app.vocabulary.bounds import SECONDS_MIN

ADD = "tests.testapp.tasks.add"
FORMS = "or a duration such as 90s, 2h, 3d or 1h30m."

# What is typed, and the seconds it means.
READ = [
    (90, 90.0),
    (1.5, 1.5),
    ("90", 90.0),
    ("1.5", 1.5),
    ("90s", 90.0),
    ("2h", 7200.0),
    ("3d", 3 * 86400.0),
    ("1h30m", 5400.0),
    (" 2h ", 7200.0),
    ("1d12h", 1.5 * 86400),
]
# Refused by every duration rule, each with the message that lists the forms.
REFUSED = ["soon", "", "-5", "-2h", "nan", "inf", "1e20", True, None, [], {"h": 2}, 10**400]


@pytest.mark.parametrize(("typed", "seconds"), READ, ids=str)
@pytest.mark.parametrize("rule", [DELAY, TIMEOUT, UNIQUE_FOR], ids=lambda r: r.field)
def test_the_rule_reads_numbers_and_durations(rule, typed, seconds):
    assert rule.check(typed) == seconds
    assert rule.parse(str(typed)) == seconds


@pytest.mark.parametrize("typed", REFUSED, ids=repr)
@pytest.mark.parametrize("rule", [DELAY, TIMEOUT, UNIQUE_FOR], ids=lambda r: r.field)
def test_the_rule_refuses_what_is_no_duration_saying_what_is_accepted(rule, typed):
    with pytest.raises(ValidationError) as info:
        rule.check(typed)
    [message] = info.value.message_dict[rule.field]
    assert message.startswith("Must be a number of seconds from ") and message.endswith(FORMS)


def test_the_bounds_are_the_seconds_bounds():
    rule = Duration("expires_in", 3600)
    assert rule.check("1h") == 3600.0
    for too_much in ("1h1s", "61m", 3600.5):
        with pytest.raises(ValidationError):
            rule.check(too_much)
    # The shortest duration is the shortest number of seconds; a text that rounds to 0 is refused.
    assert rule.check(SECONDS_MIN) == SECONDS_MIN
    for too_little in ("0", "0s", "5e-324", SECONDS_MIN / 2):
        with pytest.raises(ValidationError):
            rule.check(too_little)
    assert Duration("delay", 10, zero_ok=True).check("0s") == 0.0


def test_the_schema_offers_a_number_or_text():
    assert DELAY.schema()["oneOf"][0] == {"type": "number", "minimum": 0, "maximum": DELAY.high}
    assert DELAY.schema()["oneOf"][1]["type"] == "string"


@pytest.mark.django_db
class TestEntryPoints:
    @pytest.mark.parametrize(("typed", "seconds"), READ, ids=str)
    def test_api_delay_timeout_and_unique_for(self, api, typed, seconds):
        before = timezone.now()
        body = {"task": ADD, "args": [1, 2], "delay": typed, "timeout": typed, "unique_for": typed}
        response = api.post("/api/jobs/", json.dumps(body), content_type="application/json")
        assert response.status_code == 201, response.content
        job = Job.objects.get()
        assert job.timeout == seconds
        assert before + timedelta(seconds=seconds) <= job.execute_at <= timezone.now() + timedelta(seconds=seconds)
        assert response.json()["timeout"] == seconds

    def test_api_refuses_with_the_forms(self, api):
        body = {"task": ADD, "args": [1, 2], "delay": "tomorrow", "timeout": "-2h", "unique_for": "2y"}
        response = api.post("/api/jobs/", json.dumps(body), content_type="application/json")
        assert response.status_code == 400
        errors = response.json()
        assert errors["delay"] == [f"Must be a number of seconds from 0 to 3153600000, {FORMS}"]
        assert errors["timeout"] == [f"Must be a number of seconds from 0.001 to 31536000, {FORMS}"]
        assert errors["unique_for"] == [f"Must be a number of seconds from 0.001 to 31622400, {FORMS}"]
        assert Job.objects.count() == 0

    @pytest.mark.parametrize(("typed", "seconds"), READ, ids=str)
    def test_enqueue_command(self, typed, seconds):
        before = timezone.now()
        call_command(
            "enqueue",
            ADD,
            "--args",
            "[1, 2]",
            "--in",
            str(typed),
            "--timeout",
            str(typed),
            "--unique-for",
            str(typed),
            stdout=io.StringIO(),
        )
        job = Job.objects.get()
        assert job.timeout == seconds
        assert job.execute_at >= before + timedelta(seconds=seconds)

    def test_enqueue_command_refuses_with_the_forms(self):
        with pytest.raises(CommandError) as info:
            call_command("enqueue", ADD, "--args", "[1, 2]", "--in", "3 fortnights")
        assert f"argument --in: Must be a number of seconds from 0 to 3153600000, {FORMS}" in str(info.value)

    @pytest.mark.parametrize(("typed", "seconds"), READ, ids=str)
    def test_enqueue_from_code(self, typed, seconds):
        before = timezone.now()
        job, created = enqueue(ADD, [1, 2], delay=typed, timeout=typed, unique_for=typed)
        assert created and job.timeout == seconds
        assert job.execute_at >= before + timedelta(seconds=seconds)

    def test_enqueue_from_code_refuses_with_the_forms(self):
        with pytest.raises(ValidationError) as info:
            enqueue(ADD, [1, 2], delay="soon")
        assert info.value.message_dict == {"delay": [f"Must be a number of seconds from 0 to 3153600000, {FORMS}"]}

    @pytest.mark.parametrize(("typed", "seconds"), [r for r in READ if isinstance(r[0], str)], ids=str)
    def test_admin_form_timeout(self, client, superuser, typed, seconds):
        client.force_login(superuser)
        response = client.post(
            "/admin/scheduler_app/job/add/", {"task": ADD, "args": "[1, 2]", "kwargs": "{}", "timeout": typed}
        )
        assert response.status_code == 302, response.context["adminform"].form.errors
        assert Job.objects.get().timeout == seconds

    def test_admin_form_refuses_with_the_forms(self, client, superuser):
        client.force_login(superuser)
        response = client.post(
            "/admin/scheduler_app/job/add/", {"task": ADD, "args": "[1, 2]", "kwargs": "{}", "timeout": "1 eon"}
        )
        assert response.status_code == 200
        assert response.context["adminform"].form.errors["timeout"] == [
            f"Must be a number of seconds from 0.001 to 31536000, {FORMS}"
        ]


@pytest.mark.parametrize(("typed", "seconds"), READ, ids=str)
def test_snooze(typed, seconds):
    assert Snooze(typed).seconds == seconds


@pytest.mark.parametrize("typed", REFUSED, ids=repr)
def test_snooze_refuses_in_the_task_with_the_forms(typed):
    with pytest.raises(ValueError, match="or a duration such as 90s, 2h, 3d or 1h30m"):
        Snooze(typed)


def test_options_take_durations():
    @options(timeout="30m", unique_for="1d")
    def work():
        pass

    chosen = work.__scheduler_options__
    assert (chosen.timeout, chosen.unique_for) == (1800.0, 86400.0)
    with pytest.raises(ImproperlyConfigured, match="unique_for: Must be a number of seconds .* or a duration"):
        options(unique_for="forever")
