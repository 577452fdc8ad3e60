"""The dashboard page, its JSON feed, queue pause/resume, and the workers admin."""

import re
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import NoReverseMatch, resolve, reverse
from django.utils import timezone

from scheduler_app.admin import dashboard
from scheduler_app.models import Dashboard, JobStatus, Queue, Worker

pytestmark = pytest.mark.django_db

DASHBOARD = "/admin/scheduler_app/dashboard/"
DATA = reverse("admin:scheduler_app_dashboard_data")


def toggle_url(queue, action):
    return reverse("admin:scheduler_app_queue_toggle", args=[queue, action])


class TestPage:
    def test_url_and_admin_chrome(self, admin_client_):
        assert reverse("admin:scheduler_app_dashboard") == DASHBOARD
        response = admin_client_.get(DASHBOARD)
        html = response.content.decode()
        assert response.status_code == 200
        assert 'id="header"' in html and 'class="breadcrumbs"' in html
        assert "<h1>Scheduler dashboard</h1>" in html
        assert "scheduler_app/js/dashboard.js" in html
        assert f'data-url="{DATA}"' in html
        for section in dashboard.SECTIONS:
            assert f'data-section="{section}"' in html

    def test_linked_from_the_admin_index_and_app_index(self, admin_client_):
        for url in (reverse("admin:index"), reverse("admin:app_list", args=["scheduler_app"])):
            html = admin_client_.get(url).content.decode()
            assert f'<a href="{DASHBOARD}"' in html and ">Dashboard</a>" in html

    def test_counts_and_sections(self, admin_client_, job_row):
        now = timezone.now()
        job_row(execute_at=now - timedelta(seconds=30))
        job_row(execute_at=now + timedelta(hours=1), queue="slow")
        job_row(JobStatus.RUNNING, progress={"current": 3, "total": 4, "message": "m"})
        failed = job_row(
            JobStatus.FAILED,
            errors=[
                {"attempt": 1, "exception_class": "builtins.ValueError", "message": "disk <full>", "traceback": "tb"}
            ],
        )
        job_row(JobStatus.SUCCEEDED)
        html = admin_client_.get(DASHBOARD).content.decode()
        assert 'id="sched-count-pending">2<' in html
        assert 'id="sched-count-running">1<' in html
        assert 'id="sched-count-failed">1<' in html
        assert 'id="sched-due-now">1<' in html
        assert "42 s" in html  # running elapsed
        assert "75%" in html  # running progress
        assert "disk &lt;full&gt;" in html
        assert reverse("admin:scheduler_app_job_change", args=[failed.pk]) in html
        # The history charts are drawn by charts.js from the document embedded in the page.
        assert 'id="sched-history-data"' in html and 'data-chart="throughput"' in html

    def test_empty_dashboard(self, admin_client_):
        html = admin_client_.get(DASHBOARD).content.decode()
        assert "Nothing is running." in html and "No pending jobs." in html and "No failed jobs." in html
        assert "No dispatcher has reported" in html


class TestMounting:
    """The dashboard is the admin of the Dashboard proxy model; admin.site is not patched."""

    def test_the_site_is_not_patched(self):
        # The old install() replaced the site's get_urls/get_app_list with closures.
        for name in ("get_urls", "get_app_list"):
            method = getattr(admin.site, name)
            assert method.__func__ is getattr(admin.site.__class__, name), name

    def test_urls_belong_to_the_proxy_admin(self):
        model_admin = admin.site._registry[Dashboard]
        assert isinstance(model_admin, dashboard.DashboardAdmin)
        for url in (DASHBOARD, DATA, toggle_url("slow", "pause")):
            assert resolve(url).func.model_admin is model_admin, url
        assert reverse("admin:scheduler_app_dashboard_changelist") == DASHBOARD

    def test_nothing_to_add_change_or_delete(self, admin_client_, rf, superuser):
        request = rf.get(DASHBOARD)
        request.user = superuser
        model_admin = admin.site._registry[Dashboard]
        assert model_admin.get_model_perms(request) == {"add": False, "change": False, "delete": False, "view": True}
        for name in ("add", "change", "delete", "history"):
            with pytest.raises(NoReverseMatch):
                reverse(f"admin:scheduler_app_dashboard_{name}", args=[] if name == "add" else [1])
        assert admin_client_.get(DASHBOARD + "add/").status_code == 404
        codenames = Permission.objects.filter(content_type__model="dashboard").values_list("codename", flat=True)
        assert list(codenames) == ["view_dashboard"]

    def test_listed_first_in_the_scheduler_app(self, admin_client_):
        html = admin_client_.get(reverse("admin:index")).content.decode()
        app = html[html.index('class="app-scheduler_app module') :]
        app = app[: app.index("</table>")]
        models = re.findall(r'<tr class="model-(\w+)', app)
        assert models[0] == "dashboard" and set(models) == {
            "auditevent",
            "dashboard",
            "job",
            "queue",
            "schedule",
            "worker",
            "workflow",
        }
        assert "/admin/scheduler_app/dashboard/add/" not in html


class TestData:
    def test_json_numbers(self, admin_client_, job_row):
        now = timezone.now()
        job_row(execute_at=now - timedelta(seconds=90))
        job_row(execute_at=now + timedelta(minutes=10))
        job_row(JobStatus.SUCCEEDED)
        job_row(
            JobStatus.FAILED, errors=[{"attempt": 1, "exception_class": "x.Boom", "message": "boom", "traceback": ""}]
        )
        data = admin_client_.get(DATA).json()
        assert data["counts"] == {"pending": 2, "waiting": 0, "running": 0, "succeeded": 1, "failed": 1, "cancelled": 0}
        default = next(q for q in data["queues"] if q["name"] == "default")
        assert (default["pending"], default["due"], default["running"]) == (2, 1, 0)
        assert 89 <= data["oldest_due_lag_seconds"] <= 120
        assert data["history"]["bucket_seconds"] == 60 and len(data["history"]["buckets"]) == 60
        assert admin_client_.get(DATA + "?minutes=10080").json()["history"]["bucket_seconds"] == 3600
        assert admin_client_.get(DATA + "?minutes=nope").json()["minutes"] == 60
        assert data["failures"][0]["message"] == "boom" and data["failures"][0]["exception_class"] == "Boom"
        assert set(data["html"]) == set(dashboard.SECTIONS)
        assert isinstance(data["took_ms"], int)
        assert 'id="sched-count-pending">2<' in data["html"]["summary"]

    def test_upcoming_order_due_by_priority_then_future_by_time(self, admin_client_, job_row):
        now = timezone.now()
        due_low = job_row(execute_at=now - timedelta(minutes=5), priority=0)
        due_high = job_row(execute_at=now - timedelta(minutes=1), priority=50)
        due_low_newer = job_row(execute_at=now - timedelta(minutes=2), priority=0)
        later = job_row(execute_at=now + timedelta(hours=2), priority=100)
        sooner = job_row(execute_at=now + timedelta(minutes=2), priority=-10)
        job_row(JobStatus.SUCCEEDED)
        upcoming = admin_client_.get(DATA).json()["upcoming"]
        assert [j["id"] for j in upcoming] == [due_high.pk, due_low.pk, due_low_newer.pk, sooner.pk, later.pk]
        assert [j["due"] for j in upcoming] == [True, True, True, False, False]
        assert upcoming[3]["when"] == "in 2 min" or upcoming[3]["when"] == "in 1 min"

    def test_upcoming_is_capped_at_20(self, admin_client_, job_row):
        for _ in range(25):
            job_row(execute_at=timezone.now() + timedelta(minutes=1))
        assert len(admin_client_.get(DATA).json()["upcoming"]) == 20

    def test_running_with_elapsed_and_failures_capped_at_10(self, admin_client_, job_row):
        running = job_row(JobStatus.RUNNING, cancel_requested=True)
        for i in range(12):
            job_row(JobStatus.FAILED, finished_at=timezone.now() - timedelta(minutes=i), errors=[{"message": f"m{i}"}])
        data = admin_client_.get(DATA).json()
        assert data["running"][0]["id"] == running.pk
        assert 41 <= data["running"][0]["elapsed_seconds"] <= 60
        assert data["running"][0]["cancel_requested"] is True
        assert [f["message"] for f in data["failures"]] == [f"m{i}" for i in range(10)]

    def test_running_elapsed_is_the_current_attempts(self, admin_client_, job_row):
        now = timezone.now()
        job_row(
            JobStatus.RUNNING,
            attempts=2,
            started_at=now - timedelta(hours=3),
            last_attempted_at=now - timedelta(seconds=42),
        )
        [row] = admin_client_.get(DATA).json()["running"]
        assert 41 <= row["elapsed_seconds"] <= 60

    def test_workers_alive_and_dead(self, admin_client_):
        now = timezone.now()
        Worker.objects.create(
            id="a",
            hostname="h1",
            pid=1,
            queues=["default", "slow"],
            slots={"*": 4},
            last_heartbeat=now,
            processed=7,
            failed=1,
        )
        Worker.objects.create(
            id="b",
            hostname="h2",
            pid=2,
            queues=["other"],
            slots={"other": 2},
            last_heartbeat=now - timedelta(minutes=5),
        )
        Worker.objects.create(
            id="gone", hostname="h3", pid=3, queues=["other"], state="stopped", last_heartbeat=now - timedelta(days=2)
        )
        data = admin_client_.get(DATA).json()
        workers = {w["id"]: w for w in data["workers"]}
        assert set(workers) == {"a", "b"}  # "gone" stopped two days ago
        assert workers["a"]["state"] == "alive" and workers["b"]["state"] == "dead"
        assert workers["a"]["slots"] == {"default": 4, "slow": 4} and workers["a"]["shared"]
        # One pool of 4 for both queues never reads like 8 slots.
        assert (
            workers["a"]["slots_text"] == "4 slots shared by default, slow" and workers["b"]["slots_text"] == "other: 2"
        )
        assert (workers["a"]["processed"], workers["a"]["failed"]) == (7, 1)
        assert 299 <= workers["b"]["heartbeat_age_seconds"] <= 320
        assert data["workers_alive"] == 1
        html = data["html"]["workers"]
        assert "sched-worker-alive" in html and "sched-worker-dead" in html

    def test_the_task_table_comes_from_the_rollups(self, admin_client_):
        from scheduler_app.observability import rollups
        from scheduler_app.vocabulary.tallies import Tally

        now = timezone.now()
        tally = Tally(started=4, succeeded=3, retried=1)
        for v in (0.02, 0.03, 0.04, 2.0):
            tally.run.add(v)
        rollups.record({(now.timestamp(), "default", "tests.testapp.tasks.add"): tally}, now)
        data = admin_client_.get(DATA).json()
        (row,) = data["tasks"]
        assert (row["task"], row["runs"], row["failures"], row["failure_rate"]) == (
            "tests.testapp.tasks.add",
            4,
            1,
            0.25,
        )
        html = data["html"]["tasks"]
        assert "?task=tests.testapp.tasks.add&amp;status__exact=failed" in html and "25.0 %" in html

    def test_query_count_does_not_grow_with_rows(self, admin_client_, job_row, monkeypatch):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from scheduler_app.observability import stats

        # Exact counts throughout: whether PostgreSQL's estimate is used
        # depends on what autovacuum last saw of the table (other tests' rows).
        monkeypatch.setattr(stats, "EXACT_COUNT_LIMIT", 10**12)

        def count():
            with CaptureQueriesContext(connection) as ctx:
                admin_client_.get(DATA)
            return len(ctx)

        # Every row late from the start: one turning late between the two
        # counts (a loaded machine) would add the late reasons' queries.
        hour_ago = timezone.now() - timedelta(hours=1)
        for status in JobStatus.values:
            job_row(status, execute_at=hour_ago)
        Worker.objects.create(id="w-first", hostname="h", pid=1)
        admin_client_.get(DATA)
        few = count()
        for status in JobStatus.values:
            for _ in range(15):
                job_row(status, execute_at=hour_ago)
        Worker.objects.bulk_create(Worker(id=f"w{i}", hostname="h", pid=i + 2) for i in range(5))
        # Two session/user queries, then a fixed set of stats queries (the
        # history's three, the task table's one, the workflows' one and the late
        # reasons' among them).
        assert count() == few <= 24


class TestQueues:
    def test_pause_and_resume(self, admin_client_):
        response = admin_client_.post(toggle_url("slow", "pause"))
        assert response.status_code == 302 and response["Location"] == DASHBOARD
        assert Queue.objects.get(name="slow").paused
        assert [str(m) for m in get_messages(response.wsgi_request)] == [
            "Queue “slow” paused: its pending jobs wait (running ones finish) until it resumes."
        ]
        html = admin_client_.get(DASHBOARD).content.decode()
        assert toggle_url("slow", "resume") in html and ">Resume queue</button>" in html
        response = admin_client_.post(toggle_url("slow", "resume"), HTTP_ACCEPT="application/json")
        assert response.json() == {
            "queue": "slow",
            "paused": False,
            "message": "Queue “slow” resumed: its due jobs start as slots free up.",
        }
        assert not Queue.objects.get(name="slow").paused

    def test_unknown_queue_is_a_message_not_a_500(self, admin_client_):
        response = admin_client_.post(toggle_url("nope", "pause"), follow=True)
        assert response.status_code == 200
        assert "Unknown queue 'nope'. Known queues: default, other, slow." in [
            str(m) for m in get_messages(response.wsgi_request)
        ]
        response = admin_client_.post(toggle_url("nope", "pause"), HTTP_ACCEPT="application/json")
        assert response.status_code == 400 and "Unknown queue" in response.json()["error"]
        assert admin_client_.post(toggle_url("slow", "explode")).status_code == 404

    def test_get_is_not_allowed(self, admin_client_):
        assert admin_client_.get(toggle_url("slow", "pause")).status_code == 405
        assert not Queue.objects.filter(paused=True).exists()

    def test_csrf_is_required(self, superuser):
        client = Client(enforce_csrf_checks=True)
        client.force_login(superuser)
        assert client.post(toggle_url("slow", "pause")).status_code == 403
        assert not Queue.objects.filter(paused=True).exists()

    def test_upcoming_ranks_what_will_run_and_counts_paused_queues_apart(self, admin_client_, job_row):
        paused = job_row(queue="slow", priority=100)
        runs = job_row(queue="default", execute_at=timezone.now() + timedelta(minutes=5))
        admin_client_.post(toggle_url("slow", "pause"))
        data = admin_client_.get(DATA).json()
        assert [j["id"] for j in data["upcoming"]] == [runs.pk]  # not the paused queue's job, due and urgent as it is
        assert data["upcoming_paused"] == [{"name": "slow", "pending": 1}]
        assert "Not listed, paused:" in data["html"]["upcoming"] and "1 pending in slow" in data["html"]["upcoming"]
        assert next(q for q in data["queues"] if q["name"] == "slow")["paused"] is True
        admin_client_.post(toggle_url("slow", "resume"))
        assert [j["id"] for j in admin_client_.get(DATA).json()["upcoming"]] == [paused.pk, runs.pk]


class TestWorkerAdmin:
    def test_read_only_list_with_alive_and_dead(self, admin_client_):
        now = timezone.now()
        Worker.objects.create(
            id="w-alive", hostname="h", pid=1, queues=["default"], slots={"default": 3}, last_heartbeat=now
        )
        Worker.objects.create(
            id="w-dead",
            hostname="h",
            pid=2,
            queues=["slow"],
            slots={"*": 2},
            last_heartbeat=now - timedelta(minutes=10),
        )
        html = admin_client_.get(reverse("admin:scheduler_app_worker_changelist")).content.decode()
        assert "sched-worker-alive" in html and "sched-worker-dead" in html
        assert "default: 3" in html and "2 slots shared by slow" in html
        assert "10 min ago" in html
        assert admin_client_.get(reverse("admin:scheduler_app_worker_add")).status_code == 403
        detail = admin_client_.get(reverse("admin:scheduler_app_worker_change", args=["w-alive"]))
        assert detail.status_code == 200 and 'name="hostname"' not in detail.content.decode()
        assert (
            admin_client_.post(
                reverse("admin:scheduler_app_worker_delete", args=["w-alive"]), {"post": "yes"}
            ).status_code
            == 403
        )
        assert Worker.objects.count() == 2


@pytest.mark.parametrize(
    "slots, queues, text",
    [
        ({"*": 4}, ["default", "slow"], "4 slots shared by default, slow"),
        ({"*": 1}, ["default"], "1 slot shared by default"),
        ({"slow": 2, "*": 4}, ["default", "slow", "mail"], "slow: 2; 4 slots shared by default, mail"),
        ({"default": 4, "slow": 2}, ["default", "slow"], "default: 4, slow: 2"),
        ({}, [], "–"),
    ],
)
def test_slots_text_never_reads_a_shared_pool_as_one_per_queue(slots, queues, text):
    from scheduler_app.admin.formatting import slots_text

    assert slots_text(slots, queues) == text


def test_the_task_run_times_page_draws_a_chart_per_task(admin_client_, client, staff_user):
    from datetime import timedelta

    from django.utils import timezone

    from scheduler_app.observability import rollups
    from scheduler_app.vocabulary.tallies import Tally
    from tests.plumbing import grant

    now = timezone.now()
    tallies = {}
    for minute in range(0, 30, 3):
        for task, seconds in (("tests.testapp.tasks.add", 0.02), ("tests.testapp.tasks.slow", 4.0)):
            t = Tally(started=2, succeeded=2)
            t.run.add(seconds)
            t.run.add(seconds * 2)
            at = (now - timedelta(minutes=minute)).replace(second=0, microsecond=0)
            tallies[(at.timestamp(), "default", task)] = t
    rollups.record(tallies, now)
    url = "/admin/scheduler_app/dashboard/runtimes/"
    html = admin_client_.get(url).content.decode()
    assert html.count('data-chart="runtime"') == 2 and html.count('id="sched-runtime-') == 2
    assert "p95" in html and "tests.testapp.tasks.slow" in html
    one = admin_client_.get(url, {"task": "tests.testapp.tasks.slow", "minutes": "1440"}).content.decode()
    assert one.count('data-chart="runtime"') == 1 and "tests.testapp.tasks.add" not in one
    assert "Task run times" in admin_client_.get("/admin/scheduler_app/dashboard/").content.decode()
    client.force_login(staff_user)
    assert client.get(url).status_code == 403  # the dashboard's permission
    grant(staff_user, "scheduler_app.view_dashboard")
    assert client.get(url).status_code == 200


def test_a_staff_user_makes_their_own_api_token_from_the_admin(client, staff_user):
    from rest_framework.authtoken.models import Token

    url = "/admin/scheduler_app/dashboard/token/"
    assert client.get(url).status_code == 302  # not logged in: the login page
    client.force_login(staff_user)  # staff, no model permission at all
    page = client.get(url).content.decode()
    assert "You have no API token yet." in page and "Make my token" in page
    made = client.post(url).content.decode()
    key = Token.objects.get(user=staff_user).key
    assert key in made and "shown once" in made
    page = client.get(url).content.decode()
    assert key not in page and key[:4] + "…" in page
    client.post(url)
    assert Token.objects.get(user=staff_user).key != key  # a new one; the old one stops working
    from rest_framework.test import APIClient

    caller = APIClient()
    caller.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get(user=staff_user).key}")
    assert caller.get("/api/jobs/").status_code == 403  # the token is the user, with the user's permissions
    caller.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert caller.get("/api/jobs/").status_code == 401


def test_a_non_staff_user_gets_no_token_page(client, plain_user):
    client.force_login(plain_user)
    assert client.get("/admin/scheduler_app/dashboard/token/").status_code == 302
    assert client.post("/admin/scheduler_app/dashboard/token/").status_code == 302
