"""The installable app, tried as a new user would: build the wheel, install it into a fresh
virtual environment, start a project with ``django-admin startproject``, and follow the
README's "Add to an existing project" and "Testing your tasks" to the letter.

The steps below are the README's (tests/packaging/test_readme_steps.py checks that the
README still says them). Runs once, in the SQLite pass of ``make test``: nothing in it
depends on the test database.
"""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="runs once, in the SQLite pass"),
]

# -- The README's steps, as files and commands --------------------------------

SETTINGS_ADDITIONS = """
INSTALLED_APPS += [
    "rest_framework.authtoken",  # the API's tokens
    "scheduler_app",
    "billing",
]
TASKS = {"default": {"BACKEND": "scheduler_app.backends.SchedulerBackend"}}
"""

URLS_ADDITION = """
from django.urls import include

urlpatterns += [path("scheduler/", include("scheduler_app.urls"))]
"""

BILLING_TASKS = '''
from django.tasks import task

from scheduler_app import options


@options(max_attempts=5, timeout=30)
@task
def charge(account_id, cents):
    return {"account": account_id, "charged": cents}
'''

BILLING_TESTS = '''
from django.test import TestCase

from scheduler_app.testing import assert_enqueued, drain

from .tasks import charge


class ChargeTests(TestCase):
    def test_charge_runs(self):
        charge.enqueue(42, 1999)
        assert_enqueued(charge, args=[42, 1999])
        self.assertEqual(drain(), {"succeeded": 1, "failed": 0, "cancelled": 0, "snoozed": 0})
        result = charge.get_result(charge.enqueue(7, 5).id)
        drain()
        result.refresh()
        self.assertEqual(result.return_value, {"account": 7, "charged": 5})
'''

CHECKS = '''
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.authtoken.models import Token

from scheduler_app.models import Job

job = Job.objects.get()
assert (job.status, job.result, job.max_attempts, job.timeout) == (
    "succeeded", {"account": 42, "charged": 1999}, 5, 30.0
), (job.status, job.result, job.errors)

staff = User.objects.create_user("ops", password="x", is_staff=True)
staff.user_permissions.add(
    Permission.objects.get(codename="view_dashboard"), Permission.objects.get(codename="view_job")
)
client = Client(HTTP_HOST="localhost")
client.force_login(staff)
page = client.get("/admin/scheduler_app/dashboard/")
assert page.status_code == 200, page.status_code
assert client.get("/admin/").status_code == 200

token = Token.objects.create(user=staff)
api = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Token {token.key}")
root = api.get("/scheduler/api/")
assert root.status_code == 200 and root["Content-Type"] == "application/json", root.content
assert root.json()["jobs"].endswith("/scheduler/api/jobs/"), root.json()
jobs = api.get("/scheduler/api/jobs/")
assert jobs.status_code == 200 and jobs.json()["results"][0]["status"] == "succeeded", jobs.content
missing = api.get("/scheduler/api/nope/")
assert missing.status_code == 404 and missing["Content-Type"] == "application/json"
schema = api.get("/scheduler/api/schema/?format=json")
assert schema.status_code == 200 and "/scheduler/api/jobs/" in schema.json()["paths"], list(schema.json()["paths"])[:3]
assert api.get("/scheduler/api/docs/").status_code == 200
metrics = api.get("/scheduler/metrics")
assert metrics.status_code == 200 and b"scheduler_jobs" in metrics.content, metrics.content[:300]
anonymous = Client(HTTP_HOST="localhost").get("/scheduler/api/jobs/")
assert anonymous.status_code == 401 and anonymous["Content-Type"] == "application/json"
print("FRESH PROJECT OK")
'''


def run(cmd, cwd, env=None, timeout=300, check=True):
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def build_wheel(tmp):
    """Build the wheel from a copy of the package's files (the build writes egg-info next to them)."""
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "scheduler_app", source / "scheduler_app", ignore=shutil.ignore_patterns("__pycache__"))
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(source)], cwd=tmp)
    (wheel,) = (tmp / "dist").glob("django_scheduler_app-*.whl")
    return wheel


def test_a_fresh_project_follows_the_readme(tmp_path):
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    run([sys._base_executable, "-m", "venv", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    # pip install django-scheduler-app (the wheel this checkout builds; its
    # dependencies come from the package index, or pip's cache).
    run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)], cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SCHEDULER_", "DATABASE_URL"))}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    site = tmp_path / "site"
    site.mkdir()
    run(["django-admin", "startproject", "mysite", "."], cwd=site, env=env)
    run([str(python), "manage.py", "startapp", "billing"], cwd=site, env=env)
    (site / "billing" / "tasks.py").write_text(textwrap.dedent(BILLING_TASKS))
    (site / "billing" / "tests.py").write_text(textwrap.dedent(BILLING_TESTS))
    with open(site / "mysite" / "settings.py", "a") as fh:
        fh.write(SETTINGS_ADDITIONS)
    with open(site / "mysite" / "urls.py", "a") as fh:
        fh.write(URLS_ADDITION)

    manage = [str(python), "manage.py"]
    check = run([*manage, "check"], cwd=site, env=env)
    assert "System check identified no issues" in check.stdout, check.stdout + check.stderr
    run([*manage, "migrate", "--no-input"], cwd=site, env=env)
    run([*manage, "shell", "-c", "from billing.tasks import charge; charge.enqueue(42, 1999)"], cwd=site, env=env)
    burst = run([*manage, "rundispatcher", "--burst"], cwd=site, env=env, timeout=120)
    assert "dispatcher " in burst.stdout and "database sqlite" in burst.stdout, burst.stdout
    checked = run([*manage, "shell", "-c", CHECKS], cwd=site, env=env)
    assert "FRESH PROJECT OK" in checked.stdout, checked.stdout + checked.stderr
    # "Testing your tasks": the user's own TestCase, with Django's runner.
    tests = run([*manage, "test", "billing", "-v", "1"], cwd=site, env=env, check=False)
    assert tests.returncode == 0 and "OK" in tests.stderr, tests.stdout + tests.stderr
