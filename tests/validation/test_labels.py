"""Tags, meta and routes: one rule each, the same refusal from every entry point (issue 26)."""

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.management import call_command
from django.tasks import task_backends
from django.tasks.exceptions import InvalidTask
from django.test import override_settings

from scheduler_app import lifecycle, options
from scheduler_app.checks import check_settings
from scheduler_app.models import Job
from scheduler_app.validation.labels import META, ROUTES, TAGS, route_of
from scheduler_app.vocabulary.bounds import META_MAX_BYTES, TAGS_MAX
from tests.plumbing import ADD, manage_in_process
from tests.testapp import tasks as t

pytestmark = pytest.mark.django_db

TAGGED = "tests.testapp.tasks.tagged"
IMPORTANT = "tests.testapp.tasks.important"

# (field, value, start of the message) refused alike everywhere.
BAD = [
    ("tags", "billing", "Must be a list of at most 20 tags"),
    ("tags", ["has space"], "'has space' is not a tag"),
    ("tags", ["x" * 65], f"'{'x' * 65}' is not a tag"),
    ("tags", [""], "'' is not a tag"),
    ("tags", [7], "7 is not a tag"),
    ("tags", [f"t{i}" for i in range(TAGS_MAX + 1)], "At most 20 tags; 21 given."),
    ("meta", ["a"], "Must be a JSON object of at most 8,192 bytes."),
    ("meta", {"a": "x" * META_MAX_BYTES}, "Takes 8,200 bytes as JSON; at most 8,192."),
    ("meta", {"a": "\x00"}, "Text may not contain NUL"),
]


def test_the_rules_normalise():
    assert TAGS.check(["a", "b:c", "a", "d.e-f_1"]) == ["a", "b:c", "d.e-f_1"]
    assert TAGS.parse("a, b c") == ["a", "b", "c"]
    assert META.check({"k": (1, 2)}) == {"k": [1, 2]}
    assert TAGS.check([f"t{i}" for i in range(TAGS_MAX)]) == [f"t{i}" for i in range(TAGS_MAX)]
    META.check({"a": "x" * (META_MAX_BYTES - 8)})  # 8,192 bytes exactly


@pytest.mark.parametrize(("field", "value", "message"), BAD)
def test_enqueue_refuses(field, value, message):
    with pytest.raises(ValidationError) as caught:
        lifecycle.enqueue(ADD, [1, 2], **{field: value})
    assert caught.value.message_dict[field][0].startswith(message)
    assert Job.objects.count() == 0


@pytest.mark.parametrize(("field", "value", "message"), BAD)
def test_the_api_refuses_with_the_same_words(api, field, value, message):
    response = api.post("/api/jobs/", {"task": ADD, "args": [1, 2], field: value}, format="json")
    assert response.status_code == 400
    assert response.json()[field][0].startswith(message)
    bulk = api.post("/api/jobs/bulk/", {"jobs": [{"task": ADD, "args": [1, 2], field: value}]}, format="json")
    assert bulk.status_code == 400
    assert bulk.json()["jobs"]["0"][field][0].startswith(message)
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tag", "has space"], "'has space' is not a tag"),
        (["--meta", "[1]"], "Must be a JSON object of at most 8,192 bytes."),
        (["--meta", "{nope"], "Not valid JSON"),
        ([arg for i in range(TAGS_MAX + 1) for arg in ("--tag", f"t{i}")], "tags: At most 20 tags; 21 given."),
    ],
)
def test_the_command_refuses_with_exit_code_2(args, message, transactional_db):
    code, _, stderr = manage_in_process("enqueue", ADD, "--args", "[1, 2]", *args)
    assert code == 2
    assert message in stderr and len(stderr.strip().splitlines()) == 1
    assert Job.objects.count() == 0


def test_every_entry_point_sets_them(api):
    api_job = api.post(
        "/api/jobs/", {"task": ADD, "args": [1, 2], "tags": ["a", "a", "b"], "meta": {"k": "v"}}, format="json"
    )
    assert api_job.status_code == 201
    assert (api_job.json()["tags"], api_job.json()["meta"]) == (["a", "b"], {"k": "v"})
    bulk = api.post("/api/jobs/bulk/", {"jobs": [{"task": ADD, "args": [1, 2], "tags": ["c"]}]}, format="json")
    assert bulk.json()[0]["tags"] == ["c"] and bulk.json()[0]["meta"] == {}
    job, _ = lifecycle.enqueue(ADD, [1, 2], tags=("d",), meta={"n": 1})
    assert (job.tags, job.meta) == (["d"], {"n": 1})
    call_command("enqueue", ADD, "--args", "[1, 2]", "--tag", "e", "--tag", "f", "--meta", '{"incident": "INC-1"}')
    made = Job.objects.latest("id")
    assert (made.tags, made.meta) == (["e", "f"], {"incident": "INC-1"})


def test_options_tags_are_the_default_and_the_caller_wins(api):
    by_backend = t.tagged.enqueue(1)
    assert Job.objects.get(pk=int(by_backend.id)).tags == ["billing", "nightly"]
    assert lifecycle.enqueue(TAGGED, [2])[0].tags == ["billing", "nightly"]
    assert lifecycle.enqueue(TAGGED, [3], tags=["mine"])[0].tags == ["mine"]
    assert api.post("/api/jobs/", {"task": TAGGED, "tags": []}, format="json").json()["tags"] == []
    described = {d["name"]: d for d in api.get("/api/tasks/").json()}
    assert described[TAGGED]["options"]["tags"] == ["billing", "nightly"]


@pytest.mark.parametrize("tags", [["bad tag"], "x", [1]])
def test_options_refuse_bad_tags_at_import(tags):
    with pytest.raises(ImproperlyConfigured, match="@options: tags: "):
        options(tags=tags)


# -- routes ------------------------------------------------------------------

ROUTED = {
    "ROUTES": {"tests.testapp.tasks.add": {"queue": "slow", "priority": 7}, "tests.testapp.tasks.*": {"priority": -3}}
}


def test_route_of_first_match_wins():
    routes = [("billing.tasks.*", {"queue": "billing"}), ("billing.tasks.send", {"queue": "never"})]
    assert route_of("billing.tasks.send", routes) == {"queue": "billing"}
    assert route_of("reports.x", routes) == {}
    assert ROUTES.check({"a.*": {"queue": "q"}}) == [("a.*", {"queue": "q"})]


def test_precedence_caller_then_task_then_route_then_django():
    with override_settings(SCHEDULER=ROUTED):
        routed = lifecycle.enqueue(ADD, [1, 2])[0]
        assert (routed.queue, routed.priority) == ("slow", 7)  # the first matching entry
        given = lifecycle.enqueue(ADD, [1, 2], queue="other", priority=1)[0]
        assert (given.queue, given.priority) == ("other", 1)  # a value given at enqueue wins
        declared = lifecycle.enqueue(IMPORTANT, [])[0]
        assert (declared.queue, declared.priority) == ("other", 10)  # @task(priority=10, queue_name="other")
        globbed = lifecycle.enqueue("tests.testapp.tasks.noop", [])[0]
        assert (globbed.queue, globbed.priority) == ("default", -3)  # the glob; Django's default queue
        by_backend = t.add.enqueue(1, 2)
        assert Job.objects.filter(pk=int(by_backend.id)).values_list("queue", "priority").get() == ("slow", 7)
        chosen = t.add.using(priority=5).enqueue(1, 2)
        assert Job.objects.filter(pk=int(chosen.id)).values_list("queue", "priority").get() == ("slow", 5)


def test_a_route_to_an_unknown_queue_is_refused_at_enqueue():
    with override_settings(SCHEDULER={"ROUTES": {ADD: {"queue": "nowhere"}}}):
        with pytest.raises(ValidationError, match="Unknown queue 'nowhere'"):
            lifecycle.enqueue(ADD, [1, 2])
        with pytest.raises(InvalidTask, match="Unknown queue 'nowhere'"):
            task_backends["default"].enqueue(t.add, (1, 2), {})


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ("billing.*", "Must be a dict (or a list of pairs)"),
        ({7: {"queue": "q"}}, "7 is not a task path or glob"),
        ({"a.*": {"queue": "q", "colour": "red"}}, "a.*: unknown key 'colour'; the keys are queue and priority."),
        ({"a.*": {"queue": "a/b"}}, "a.*: queue 'a/b' is not a queue name"),
        ({"a.*": {"priority": 101}}, "a.*: priority: Must be a whole number from -100 to 100."),
        ({"a.*": {}}, "a.*: Must be a dict"),
        ([("a.*",)], "Must be a dict (or a list of pairs)"),
    ],
)
def test_the_system_check_refuses_bad_routes(routes, message):
    with override_settings(SCHEDULER={"ROUTES": routes}):
        errors = check_settings()
    assert [e.id for e in errors] == ["scheduler_app.E012"]
    assert message in errors[0].msg


def test_good_routes_pass_the_check():
    with override_settings(SCHEDULER=ROUTED):
        assert check_settings() == []
