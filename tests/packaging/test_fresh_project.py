"""The installable app, tried as a new user would: in a fresh virtual environment, start a
project with ``django-admin startproject`` and follow the README's "Add to an existing
project" and "Testing your tasks" word for word.

The steps are read from the README (``readme.steps``): every command of its ``sh`` blocks
runs as written (the checkout's path is a copy of this one; ``createsuperuser`` gets its
answers from the environment, as ``--no-input`` reads them), and every file it shows is
written or appended as it says. Runs once, in the SQLite pass of ``make test``: nothing in
it depends on the test database.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from tests.packaging import readme

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="runs once, in the SQLite pass"),
]

# -- What the README's steps must have made -----------------------------------
# The steps themselves are read from the README (tests/packaging/readme.py).

CHECKS = """
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.authtoken.models import Token

from scheduler_app.models import Job

job = Job.objects.get()
assert (job.status, job.result, job.max_attempts, job.timeout) == (
    "succeeded", {"account": 42, "charged": 1999}, 5, 30.0
), (job.status, job.result, job.errors)

# createsuperuser made the README's admin.
assert User.objects.filter(username="admin", is_superuser=True).exists()
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
"""


def run(cmd, cwd, env=None, timeout=300, check=True):
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


def checkout_copy(tmp):
    """Return a copy of the package's files: the README's checkout (building writes egg-info into it)."""
    source = tmp / "django-scheduler-app"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "scheduler_app", source / "scheduler_app", ignore=shutil.ignore_patterns("__pycache__"))
    return source


def follow(step, site, env, source):
    """Do one of the README's steps in the project's directory; return the command's result."""
    if step[0] in ("write", "append"):
        with open(site / step[1], "a" if step[0] == "append" else "w") as fh:
            fh.write(("\n" if step[0] == "append" else "") + step[2])
        return None
    command = step[1].replace(readme.CHECKOUT, str(source))
    if command.endswith("manage.py createsuperuser"):
        # What a person types at its prompts.
        env = {
            **env,
            "DJANGO_SUPERUSER_USERNAME": "admin",
            "DJANGO_SUPERUSER_EMAIL": "admin@example.com",
            "DJANGO_SUPERUSER_PASSWORD": "a-long-password-1",
        }
        command += " --no-input"
    return run(["bash", "-c", command], cwd=site, env=env, timeout=600, check=False)


def test_a_fresh_project_follows_the_readme(tmp_path):
    source = checkout_copy(tmp_path)
    venv = tmp_path / "venv"
    run([sys._base_executable, "-m", "venv", str(venv)], cwd=tmp_path)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "SCHEDULER_", "DATABASE_URL", "VIRTUAL_ENV"))
    }
    # The virtualenv activated: its python, pip and django-admin come first.
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    site = tmp_path / "site"
    site.mkdir()
    results = {}
    steps = readme.steps()
    # pip's steps come first; then, in an empty directory, the project the README says to start.
    installs = [s for s in steps if s[0] == "run" and s[1].startswith("pip ")]
    for step in installs:
        done = follow(step, site, env, source)
        assert done.returncode == 0, (step, done.stdout[-3000:], done.stderr[-3000:])
    run(readme.START_PROJECT.split(), cwd=site, env=env)
    for step in steps:
        if step in installs:
            continue
        done = follow(step, site, env, source)
        if done is not None:
            results[step[1]] = done
            if "manage.py test" not in step[1] and not step[1].startswith("pytest "):
                assert done.returncode == 0, (step, done.stdout[-3000:], done.stderr[-3000:])

    burst = next(r for c, r in results.items() if "rundispatcher" in c)
    assert "dispatcher " in burst.stdout and "database sqlite" in burst.stdout, burst.stdout
    python = venv / "bin" / "python"
    check = run([str(python), "manage.py", "check"], cwd=site, env=env)
    assert "System check identified no issues" in check.stdout, check.stdout + check.stderr
    checked = run([str(python), "manage.py", "shell", "-c", CHECKS], cwd=site, env=env)
    assert "FRESH PROJECT OK" in checked.stdout, checked.stdout + checked.stderr
    # "Testing your tasks": the user's own TestCase, with Django's runner.
    tests = next(r for c, r in results.items() if "manage.py test" in c)
    assert tests.returncode == 0 and "OK" in tests.stderr, tests.stdout + tests.stderr
    # The `scheduler` fixture, from the installed package's pytest11 entry point.
    fixture = next(r for c, r in results.items() if c.startswith("pytest "))
    assert fixture.returncode == 0 and "1 passed" in fixture.stdout, fixture.stdout[-3000:] + fixture.stderr[-2000:]
