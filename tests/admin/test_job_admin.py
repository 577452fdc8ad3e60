"""The job admin: list, filters, add form, change view, actions (Django test client)."""

import re
from datetime import timedelta
from unittest import mock

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from scheduler_app.admin import changelist
from scheduler_app.admin import jobs as job_admin
from scheduler_app.models import Job, JobStatus
from tests.plumbing import ADD, claim

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:scheduler_app_job_changelist")
ADD_URL = reverse("admin:scheduler_app_job_add")


def change_url(job):
    return reverse("admin:scheduler_app_job_change", args=[job.pk])


def listed_ids(response):
    return [
        int(m)
        for m in re.findall(r'<th class="field-id"><a href="/admin/scheduler_app/job/(\d+)/', response.content.decode())
    ]


def message_texts(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def split_dt(value):
    local = timezone.localtime(value)
    return {"execute_at_0": local.strftime("%Y-%m-%d"), "execute_at_1": local.strftime("%H:%M:%S")}


# ---------------------------------------------------------------------------
# List


class TestList:
    def test_rows_show_short_task_names_and_worker_ids_with_the_whole_on_hover(self, admin_client_, job_row):
        job_row(JobStatus.RUNNING, worker="build-7.example.com-4242-a1b2c3")
        html = admin_client_.get(CHANGELIST).content.decode()
        assert f'title="{ADD}"><strong>add</strong>' in html
        assert 'title="build-7.example.com-4242-a1b2c3">build-7-4242</span>' in html
        assert "tests.testapp.tasks.<wbr>" not in html.split('id="result_list"')[1]

    def test_years_of_a_big_list_come_from_indexed_reads(self, admin_client_, job_row, monkeypatch):
        now = timezone.now()
        job_row(JobStatus.SUCCEEDED, execute_at=now.replace(year=now.year - 2), finished_at=now)
        job_row(execute_at=now.replace(year=now.year + 1))
        monkeypatch.setattr(job_admin.CappedCountPaginator, "cap", 1)  # the list is "big"
        html = admin_client_.get(CHANGELIST).content.decode()
        years = [int(y) for y in re.findall(r"execute_at__year=(\d+)", html)]
        assert sorted(set(years)) == [now.year - 2, now.year - 1, now.year, now.year + 1]

    def test_columns_badges_and_relative_times(self, admin_client_, job_row):
        now = timezone.now()
        future = job_row(execute_at=now + timedelta(minutes=5, seconds=30))
        late = job_row(execute_at=now - timedelta(minutes=3, seconds=10))
        done = job_row(JobStatus.SUCCEEDED, started_at=now - timedelta(seconds=2), finished_at=now)
        running = job_row(JobStatus.RUNNING, progress={"current": 1, "total": 4, "message": ""})
        response = admin_client_.get(CHANGELIST)
        html = response.content.decode()
        assert response.status_code == 200
        assert set(listed_ids(response)) == {future.pk, late.pk, done.pk, running.pk}
        assert '<span class="sched-badge sched-pending">Pending</span>' in html
        assert '<span class="sched-badge sched-succeeded">Succeeded</span>' in html
        assert 'sched-badge sched-running">Running · 25%' in html
        assert "in 5 min" in html
        assert "3 min late" in html
        assert "2.0 s" in html  # the succeeded job's duration
        assert "42 s so far" in html  # the running job's elapsed time
        assert "1/3" in html and "host:1:abc" in html
        assert "4 jobs" in html

    def test_a_later_attempt_runs_for_as_long_as_this_attempt(self, admin_client_, job_row):
        now = timezone.now()
        job = job_row(
            JobStatus.RUNNING,
            attempts=2,
            started_at=now - timedelta(hours=3),
            last_attempted_at=now - timedelta(seconds=42),
        )
        # 42 s when the page is made at once; a loaded machine may take a few more.
        so_far = re.compile(r"\b4\d s so far")
        assert so_far.search(admin_client_.get(CHANGELIST).content.decode())
        html = admin_client_.get(change_url(job)).content.decode()
        assert "Started at" in html and "Last attempt at" in html and so_far.search(html)

    def test_newest_first(self, admin_client_, job_row):
        jobs = [job_row() for _ in range(3)]
        assert listed_ids(admin_client_.get(CHANGELIST)) == [j.pk for j in reversed(jobs)]

    def test_filters(self, admin_client_, job_row):
        pending = job_row()
        failed = job_row(JobStatus.FAILED)
        other = job_row(task="tests.testapp.tasks.noop", queue="other")
        old = job_row(execute_at=timezone.now() - timedelta(days=40))
        assert set(listed_ids(admin_client_.get(CHANGELIST, {"status__exact": "failed"}))) == {failed.pk}
        assert set(listed_ids(admin_client_.get(CHANGELIST, {"queue": "other"}))) == {other.pk}
        assert set(listed_ids(admin_client_.get(CHANGELIST, {"task": "tests.testapp.tasks.noop"}))) == {other.pk}
        today = timezone.localdate()
        in_range = admin_client_.get(
            CHANGELIST,
            {"execute_at__gte": str(today - timedelta(days=1)), "execute_at__lt": str(today + timedelta(days=1))},
        )
        assert set(listed_ids(in_range)) == {pending.pk, failed.pk, other.pk}
        only_from = admin_client_.get(
            CHANGELIST,
            {"execute_at__gte": str(today - timedelta(days=50)), "execute_at__lt": str(today - timedelta(days=30))},
        )
        assert set(listed_ids(only_from)) == {old.pk}
        # An empty "Before" box means no upper bound.
        assert set(
            listed_ids(
                admin_client_.get(
                    CHANGELIST, {"execute_at__gte": str(today - timedelta(days=50)), "execute_at__lt": ""}
                )
            )
        ) == {pending.pk, failed.pk, other.pk, old.pk}

    def test_filter_sidebar_lists_registered_tasks_and_queues_and_range_form(self, admin_client_, job_row):
        html = admin_client_.get(CHANGELIST).content.decode()
        assert "?task=tests.testapp.tasks.add" in html
        assert "?queue=slow" in html
        assert 'type="date" name="execute_at__gte"' in html
        assert 'type="date" name="finished_at__lt"' in html

    def test_bad_filter_value_is_not_a_500(self, admin_client_, job_row):
        job_row()
        response = admin_client_.get(CHANGELIST, {"execute_at__gte": "not-a-date"})
        assert response.status_code in (200, 302)
        response = admin_client_.get(CHANGELIST, {"execute_at__year": "abc"})
        assert response.status_code in (200, 302)

    def test_date_hierarchy_drills_down_without_scanning(self, admin_client_, job_row):
        job = job_row()
        local = timezone.localtime(job.execute_at)
        html = admin_client_.get(CHANGELIST).content.decode()
        assert f"execute_at__year={local.year}" in html
        # Only years that hold jobs are offered.
        assert f"execute_at__year={local.year - 1}" not in html and f"execute_at__year={local.year + 1}" not in html
        job_row(execute_at=job.execute_at.replace(year=local.year - 3))
        html = admin_client_.get(CHANGELIST).content.decode()
        assert f"execute_at__year={local.year - 3}" in html and f"execute_at__year={local.year - 1}" not in html
        response = admin_client_.get(CHANGELIST, {"execute_at__year": local.year, "execute_at__month": local.month})
        assert listed_ids(response) == [job.pk]
        assert f"execute_at__day={local.day}" in response.content.decode()
        other_month = 1 if local.month != 1 else 2
        assert (
            listed_ids(
                admin_client_.get(CHANGELIST, {"execute_at__year": local.year, "execute_at__month": other_month})
            )
            == []
        )

    def test_search_by_id_task_and_unique_key(self, admin_client_, job_row):
        a = job_row(unique_key="report-2026")
        b = job_row(task="tests.testapp.tasks.noop")
        # The API's ?search= rule: the id, or the text anywhere it looks.
        assert a.pk in listed_ids(admin_client_.get(CHANGELIST, {"q": str(a.pk)}))
        assert listed_ids(admin_client_.get(CHANGELIST, {"q": f" #{b.pk} "})) == [b.pk]
        assert listed_ids(admin_client_.get(CHANGELIST, {"q": "999999"})) == []
        assert listed_ids(admin_client_.get(CHANGELIST, {"q": "noop"})) == [b.pk]
        assert listed_ids(admin_client_.get(CHANGELIST, {"q": "report-2026"})) == [a.pk]
        assert listed_ids(admin_client_.get(CHANGELIST, {"q": "REPORT"})) == [a.pk]  # part of it, any case

    def test_query_count_does_not_grow_with_rows(self, admin_client_, job_row, django_assert_num_queries):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        for _ in range(3):
            job_row(JobStatus.FAILED, errors=[{"attempt": 1, "message": "x", "traceback": "t" * 1000}])
        admin_client_.get(CHANGELIST)  # warm the session and content types
        with CaptureQueriesContext(connection) as few:
            admin_client_.get(CHANGELIST)
        for _ in range(40):
            job_row(JobStatus.RUNNING)
        with CaptureQueriesContext(connection) as many:
            admin_client_.get(CHANGELIST)
        # the drill-down's years (one query in a savepoint) and the tag filter's choices (the latest jobs' tags)
        assert len(many) == len(few) <= 10, "\n".join(q["sql"][:150] for q in many.captured_queries)
        sql = " ".join(q["sql"] for q in many.captured_queries)
        assert "COUNT(" in sql and "LIMIT" in sql  # the capped count
        select_rows = [q["sql"] for q in many.captured_queries if '"errors"' in q["sql"]]
        assert select_rows == []  # tracebacks are not loaded for the list

    def test_count_is_capped(self, admin_client_, job_row):
        for _ in range(8):
            job_row()
        with mock.patch.object(changelist.CappedCountPaginator, "cap", 5):
            html = admin_client_.get(CHANGELIST).content.decode()
        assert "More than 5 jobs" in html
        assert "8 jobs" not in html
        with mock.patch.object(changelist.CappedCountPaginator, "cap", 5):
            html = admin_client_.get(CHANGELIST, {"q": "add"}).content.decode()
        assert "more than 5 results" in html
        html = admin_client_.get(CHANGELIST, {"q": "add"}).content.decode()
        assert "8 results" in html and "8 jobs" in html


# ---------------------------------------------------------------------------
# Add form


class TestAddForm:
    def test_task_is_a_select_of_registered_tasks(self, admin_client_):
        html = admin_client_.get(ADD_URL).content.decode()
        assert '<select name="task"' in html
        assert 'value="tests.testapp.tasks.add"' in html
        assert 'value="scheduler_app.demo.tasks.sleep"' in html
        assert 'data-queue="slow"' in html
        assert '<input type="text" name="task"' not in html

    def test_unknown_task_is_impossible(self, admin_client_):
        response = admin_client_.post(ADD_URL, {"task": "os.system", "args": "[]", "kwargs": "{}"})
        assert response.status_code == 200
        assert "&#x27;os.system&#x27; is not a registered task." in response.content.decode()
        assert Job.objects.count() == 0

    @pytest.mark.parametrize(
        "field,value,message",
        [
            ("args", "[1, 2", "Not valid JSON"),
            ("args", '{"a": 1}', "Must be a JSON list"),
            ("kwargs", "[1]", "Must be a JSON object"),
            ("kwargs", "{'a': 1}", "Not valid JSON"),
            ("priority", "500", "Must be a whole number from -100 to 100."),
            ("priority", "high", "Must be a whole number from -100 to 100."),
            (
                "timeout",
                "-1",
                "Must be a number of seconds from 0.001 to 31536000, or a duration such as 90s, 2h, 3d or 1h30m.",
            ),
            ("max_attempts", "0", "Must be a whole number from 1 to 100."),
            ("queue", "nope", "Unknown queue 'nope'. Known queues: default, other, slow."),
        ],
    )
    def test_bad_input_is_shown_inline(self, admin_client_, field, value, message):
        data = {"task": ADD, "args": "[1, 2]", "kwargs": "{}", field: value}
        response = admin_client_.post(ADD_URL, data)
        assert response.status_code == 200
        form = response.context["adminform"].form
        assert field in form.errors, form.errors
        assert message in " ".join(form.errors[field])
        html = response.content.decode()
        assert f'id="id_{field}_error"' in html or "errorlist" in html
        assert Job.objects.count() == 0

    def test_naive_datetime_cannot_happen_and_blank_execute_at_means_now(self, admin_client_, superuser):
        before = timezone.now()
        response = admin_client_.post(
            ADD_URL, {"task": ADD, "args": "[2, 3]", "kwargs": "{}", "execute_at_0": "", "execute_at_1": ""}
        )
        assert response.status_code == 302
        job = Job.objects.get()
        assert (job.task, job.args, job.kwargs, job.status) == (ADD, [2, 3], {}, JobStatus.PENDING)
        assert before <= job.execute_at <= timezone.now()
        assert job.created_by == superuser
        assert (job.priority, job.queue, job.max_attempts, job.timeout) == (0, "default", 3, None)
        assert LogEntry.objects.filter(object_id=str(job.pk)).exists()
        assert any("was added successfully" in m for m in message_texts(response))

    def test_defaults_come_from_the_task_and_options_are_kept(self, admin_client_):
        when = timezone.now().replace(microsecond=0) + timedelta(hours=2)
        admin_client_.post(
            ADD_URL, {"task": "tests.testapp.tasks.important", "args": "[]", "kwargs": '{"x": 1}', **split_dt(when)}
        )
        job = Job.objects.get()
        assert (job.priority, job.queue, job.kwargs, job.execute_at) == (10, "other", {"x": 1}, when)
        admin_client_.post(
            ADD_URL,
            {
                "task": ADD,
                "args": "[1, 2]",
                "kwargs": "{}",
                "priority": "-5",
                "queue": "slow",
                "max_attempts": "7",
                "timeout": "2.5",
                "unique_key": "k1",
            },
        )
        job = Job.objects.latest("id")
        assert (job.priority, job.queue, job.max_attempts, job.timeout, job.unique_key) == (-5, "slow", 7, 2.5, "k1")

    def test_created_through_lifecycle_enqueue(self, admin_client_):
        from scheduler_app import lifecycle

        with mock.patch.object(lifecycle, "enqueue", wraps=lifecycle.enqueue) as enqueue:
            admin_client_.post(ADD_URL, {"task": ADD, "args": "[1, 2]", "kwargs": "{}"})
        enqueue.assert_called_once()
        assert Job.objects.count() == 1

    def test_unique_key_held_by_an_active_job_creates_nothing(self, admin_client_, job_row):
        held = job_row(unique_key="nightly")
        response = admin_client_.post(ADD_URL, {"task": ADD, "args": "[1, 2]", "kwargs": "{}", "unique_key": "nightly"})
        assert response.status_code == 302 and response["Location"] == change_url(held)
        assert Job.objects.count() == 1
        assert any("already holds unique key" in m for m in message_texts(response))

    def test_add_link_with_unknown_task_in_the_query_string_is_ignored(self, admin_client_):
        response = admin_client_.get(ADD_URL, {"task": "os.system"})
        assert response.status_code == 200
        assert 'value="os.system"' not in response.content.decode()


# ---------------------------------------------------------------------------
# Change view


class TestChangeView:
    def test_pending_job_can_be_rescheduled_and_nothing_else(self, admin_client_, job_row):
        job = job_row()
        response = admin_client_.get(change_url(job))
        html = response.content.decode()
        assert 'name="execute_at_0"' in html and 'name="priority"' in html
        assert 'name="task"' not in html and 'name="args"' not in html
        when = timezone.now().replace(microsecond=0) + timedelta(days=1)
        response = admin_client_.post(
            change_url(job), {**split_dt(when), "priority": "50", "task": "os.system", "_save": "Save"}
        )
        assert response.status_code == 302
        job.refresh_from_db()
        assert (job.execute_at, job.priority, job.task, job.status) == (when, 50, ADD, JobStatus.PENDING)

    def test_reschedule_goes_through_the_lifecycle(self, admin_client_, job_row):
        from scheduler_app import lifecycle

        job = job_row()
        with mock.patch.object(lifecycle, "reschedule", wraps=lifecycle.reschedule) as reschedule:
            admin_client_.post(change_url(job), {**split_dt(job.execute_at), "priority": "3", "_save": "Save"})
        reschedule.assert_called_once_with(job.pk, priority=3)

    def test_bad_priority_is_inline(self, admin_client_, job_row):
        job = job_row()
        response = admin_client_.post(change_url(job), {**split_dt(job.execute_at), "priority": "101"})
        assert response.status_code == 200
        assert "Must be a whole number from -100 to 100." in response.content.decode()

    def test_job_that_started_meanwhile_gets_an_error_not_a_500(self, admin_client_, job_row):
        job = job_row()
        Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING)
        response = admin_client_.post(change_url(job), {**split_dt(job.execute_at), "priority": "9", "_save": "Save"})
        assert response.status_code == 302 and response["Location"] == change_url(job)
        assert message_texts(response) == [
            f"Not rescheduled: Only pending or waiting jobs can be rescheduled; job {job.pk} is running."
        ]
        job.refresh_from_db()
        assert job.priority == 0

    def test_form_rechecks_the_state_when_it_validates(self, job_row):
        from scheduler_app.admin.forms import JobRescheduleForm

        job = job_row()
        Job.objects.filter(pk=job.pk).update(status=JobStatus.CANCELLED)
        form = JobRescheduleForm({**split_dt(job.execute_at), "priority": "9"}, instance=job)
        assert not form.is_valid()
        assert form.non_field_errors() == [
            f"Only pending or waiting jobs can be rescheduled; job {job.pk} is cancelled."
        ]

    def test_finished_job_is_read_only_with_result_errors_and_timings(self, admin_client_, job_row):
        job = job_row(
            JobStatus.FAILED,
            attempts=2,
            errors=[
                {
                    "attempt": 1,
                    "time": "t1",
                    "worker": "w1",
                    "exception_class": "builtins.ValueError",
                    "message": "first <boom>",
                    "traceback": "Traceback (most recent call last):\n  line 1",
                },
                {
                    "attempt": 2,
                    "time": "t2",
                    "worker": "w2",
                    "exception_class": "builtins.ValueError",
                    "message": "second",
                    "traceback": "Traceback two",
                },
            ],
        )
        response = admin_client_.get(change_url(job))
        html = response.content.decode()
        assert response.status_code == 200
        assert "View job" in html
        assert 'name="execute_at_0"' not in html and 'name="_save"' not in html
        assert "first &lt;boom&gt;" in html  # escaped
        assert "Traceback (most recent call last)" in html and "Traceback two" in html
        assert "builtins.ValueError" in html and "Attempt 2" in html
        assert "3.0 s" in html  # duration
        done = job_row(JobStatus.SUCCEEDED, result={"total": 3})
        html = admin_client_.get(change_url(done)).content.decode()
        assert "&quot;total&quot;: 3" in html

    def test_post_to_a_finished_job_changes_nothing(self, admin_client_, job_row):
        job = job_row(JobStatus.SUCCEEDED)
        response = admin_client_.post(
            change_url(job),
            {"priority": "50", "execute_at_0": "2030-01-01", "execute_at_1": "00:00:00", "_save": "Save"},
        )
        assert response.status_code == 302
        job.refresh_from_db()
        assert job.priority == 0

    def test_worker_link_on_the_change_page(self, admin_client_, job_row):
        from scheduler_app.models import Worker

        Worker.objects.create(id="host:1:abc", hostname="host", pid=1, queues=["default"], slots={"*": 2})
        job = job_row(JobStatus.RUNNING)
        html = admin_client_.get(change_url(job)).content.decode()
        assert reverse("admin:scheduler_app_worker_change", args=["host:1:abc"]) in html
        assert "sched-worker-alive" in html

    def test_only_finished_jobs_can_be_deleted(self, admin_client_, job_row):
        pending, done = job_row(), job_row(JobStatus.SUCCEEDED)
        assert (
            admin_client_.post(
                reverse("admin:scheduler_app_job_delete", args=[pending.pk]), {"post": "yes"}
            ).status_code
            == 403
        )
        assert (
            admin_client_.post(reverse("admin:scheduler_app_job_delete", args=[done.pk]), {"post": "yes"}).status_code
            == 302
        )
        assert list(Job.objects.values_list("pk", flat=True)) == [pending.pk]
        assert "delete_selected" not in admin_client_.get(CHANGELIST).content.decode()


# ---------------------------------------------------------------------------
# Actions


def act(client, action, jobs, url=CHANGELIST):
    return client.post(url, {"action": action, "_selected_action": [j.pk for j in jobs]}, follow=True)


class TestActions:
    def test_cancel_counts_changed_requested_and_skipped(self, admin_client_, job_row):
        pending, running, done = job_row(), job_row(JobStatus.RUNNING), job_row(JobStatus.SUCCEEDED)
        response = act(admin_client_, "cancel_jobs", [pending, running, done])
        assert message_texts(response) == [
            "Cancelled 1 pending job; asked 1 running job to stop (cooperative cancel); "
            "skipped 1 job that had already finished or were already asked to stop."
        ]
        statuses = dict(Job.objects.values_list("pk", "status"))
        assert statuses == {pending.pk: "cancelled", running.pk: "running", done.pk: "succeeded"}
        assert Job.objects.get(pk=running.pk).cancel_requested

    def test_cancel_nothing_possible_is_a_warning(self, admin_client_, job_row):
        done = job_row(JobStatus.SUCCEEDED)
        response = act(admin_client_, "cancel_jobs", [done])
        (message,) = list(get_messages(response.wsgi_request))
        assert message.level_tag == "warning"
        assert str(message) == "Skipped 1 job that had already finished or were already asked to stop."

    def test_retry(self, admin_client_, job_row):
        failed, cancelled, pending = job_row(JobStatus.FAILED), job_row(JobStatus.CANCELLED), job_row()
        response = act(admin_client_, "retry_jobs", [failed, cancelled, pending])
        assert message_texts(response) == [
            "Queued 2 jobs to run again (at their time if still ahead, else now); skipped 1 job that were not failed or cancelled (or whose unique key is taken)."
        ]
        assert set(Job.objects.values_list("status", flat=True)) == {"pending"}

    def test_run_now(self, admin_client_, job_row):
        later = job_row(execute_at=timezone.now() + timedelta(hours=3))
        done = job_row(JobStatus.SUCCEEDED)
        before = timezone.now()
        response = act(admin_client_, "run_jobs_now", [later, done])
        assert message_texts(response) == ["Made 1 pending job due now; skipped 1 job that were not pending."]
        later.refresh_from_db()
        assert before <= later.execute_at <= timezone.now()

    def test_select_across_all_matching(self, admin_client_, job_row):
        jobs = [job_row() for _ in range(4)]
        job_row(JobStatus.SUCCEEDED)
        body = {"action": "cancel_jobs", "select_across": "1", "_selected_action": [jobs[0].pk]}
        page = admin_client_.post(CHANGELIST + "?status__exact=pending", body)
        assert "4 jobs match this filter" in page.content.decode()  # a confirmation page, nothing changed yet
        assert set(Job.objects.values_list("status", flat=True)) == {"pending", "succeeded"}
        response = admin_client_.post(CHANGELIST + "?status__exact=pending", {**body, "confirmed": "4"}, follow=True)
        assert message_texts(response) == ["Cancelled 4 pending jobs."]

    def test_too_many_selected_changes_nothing(self, admin_client_, job_row):
        jobs = [job_row() for _ in range(3)]
        with mock.patch.object(job_admin, "MAX_ACTION_JOBS", 2):
            response = act(admin_client_, "cancel_jobs", jobs)
        assert "nothing was changed" in message_texts(response)[0]
        assert set(Job.objects.values_list("status", flat=True)) == {"pending"}

    def test_actions_on_the_change_page(self, admin_client_, job_row):
        failed = job_row(JobStatus.FAILED)
        html = admin_client_.get(change_url(failed)).content.decode()
        assert 'value="retry_jobs"' in html
        response = admin_client_.post(
            change_url(failed), {"CHANGE_FORM-action": "retry_jobs", "_selected_action": [failed.pk]}, follow=True
        )
        assert response.status_code == 200
        assert message_texts(response) == ["Queued 1 job to run again (at their time if still ahead, else now)."]
        failed.refresh_from_db()
        assert failed.status == JobStatus.PENDING

    def test_actions_use_the_lifecycle(self, admin_client_, job_row):
        from scheduler_app import lifecycle

        job = job_row()
        with mock.patch.object(lifecycle, "cancel_many", wraps=lifecycle.cancel_many) as cancel_many:
            act(admin_client_, "cancel_jobs", [job])
        cancel_many.assert_called_once_with([job.pk])


def test_a_job_handed_back_at_shutdown_says_so_on_its_page(admin_client_):
    from scheduler_app import lifecycle

    job, _ = lifecycle.enqueue(ADD, [1, 2], max_attempts=2)
    (claimed,) = claim("w1", queues={"default"}, limit=1, lease=30)
    lifecycle.release("w1", [(claimed.id, claimed.attempt)])
    page = admin_client_.get(change_url(job)).content.decode()
    assert "handed back at shutdown" in page
    assert "Released at shutdown" in page  # the attempt history
