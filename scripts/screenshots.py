#!/usr/bin/env python
"""Make the README's and docs/ADMIN.md's screenshots: the dashboard, the queues page and a job page.

    .venv/bin/python scripts/screenshots.py [--out docs/img] [--widths 800,1280,1920]

It builds a throwaway SQLite project database in a temporary folder (this
repository's demo project), runs real jobs through `rundispatcher --burst`
(a failing one leaves its logs), adds a week of synthetic history (the
rollups a busy dispatcher would have written), starts `runserver`, and
drives Debian's chromium through Playwright (never `playwright install`).
Light mode, plus the dashboard in dark mode at 1280 px. While they are
taken, a job runs, the slow queue is paused with due jobs, the mail queue
is rate-limited with more due jobs than its rate, and a job waits on one due
later (STAGE). Windows are 800 px tall: the pages' first screens.
"""

import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PASSWORD = "screenshots-only-123"
SEED = """
import random
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from scheduler_app import lifecycle
from scheduler_app.observability import rollups
from scheduler_app.vocabulary.tallies import Tally

get_user_model().objects.create_superuser("admin", "admin@localhost", "%(password)s")
D = "scheduler_app.demo.tasks."
lifecycle.enqueue(D + "fail", ["the payment provider answered 503"], max_attempts=2)
for n in range(6):
    lifecycle.enqueue(D + "echo", [n], {"note": "screenshot"})
rng = random.Random(7)
now = timezone.now()
tallies = {}
for minute in range(7 * 24 * 60, 0, -1):
    at = (now - timedelta(minutes=minute)).replace(second=0, microsecond=0)
    if minute > 120 and minute %% 10:
        continue  # a sample every ten minutes beyond the last two hours
    load = 30 + 25 * abs(((minute // 60) %% 24) - 12) / 12
    for queue, task, share, slow in (("default", D + "echo", 1.0, 0.004), ("default", D + "fail", 0.05, 0.01), ("slow", D + "progress", 0.2, 4.0)):
        t = Tally()
        n = max(int(load * share * rng.uniform(0.6, 1.4)), 0)
        t.started = n
        failed = int(n * (0.9 if "fail" in task else 0.01))
        t.retried, t.failed, t.succeeded = failed // 2, failed - failed // 2, n - failed
        for _ in range(n):
            t.wait.add(rng.expovariate(1 / 0.003))
            t.run.add(rng.expovariate(1 / slow))
        tallies[(at.timestamp(), queue, task)] = t
rollups.record(tallies, now)
from scheduler_app.models import Rollup
for minute in [*range(0, 120), *range(120, 7 * 24 * 60, 10)]:
    at = (now - timedelta(minutes=minute)).replace(second=0, microsecond=0)
    depth = int(40 + 35 * rng.random())
    Rollup.objects.update_or_create(minute=at, queue="default", task="", defaults={"depth": depth, "due": depth // 4, "lag": rng.uniform(0, 0.4)})
"""

# What is on screen while the pictures are taken: a running job, a paused
# queue with due jobs, a rate-limited queue with more due jobs than its rate,
# a job waiting on a dependency, jobs due later.
STAGE = """
from datetime import timedelta
from django.utils import timezone
from scheduler_app import lifecycle
D = "scheduler_app.demo.tasks."
now = timezone.now()
lifecycle.enqueue(D + "progress", [], {"steps": 400, "delay": 0.3})
lifecycle.pause_queue("slow")
for n in range(3):
    lifecycle.enqueue(D + "sleep", [], {"seconds": 1}, priority=5)
lifecycle.set_limits("mail", rate_limit=1, rate_period=600)
for n in range(4):
    lifecycle.enqueue(D + "echo", ["newsletter", n], queue="mail")
later = lifecycle.enqueue(D + "echo", ["nightly export"], execute_at=now + timedelta(minutes=20))[0]
lifecycle.enqueue(D + "echo", ["after the export"], depends_on=[later.pk])
lifecycle.enqueue(D + "noop", [], execute_at=now + timedelta(minutes=5))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"))
    parser.add_argument("--widths", default="800,1280,1920")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    widths = [int(w) for w in args.widths.split(",")]
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        sys.exit("chromium is not installed (apt-get install chromium)")

    tmp = Path(tempfile.mkdtemp(prefix="sched-shots-"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "SCHEDULER_LOG_LEVEL": "INFO",  # the demo tasks log under scheduler_app.demo
        "TIME_ZONE": "UTC",
        "SCHEDULER_QUEUES": "default,slow,mail",
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    py = sys.executable

    def manage(*cmd, **kw):
        return subprocess.run(
            [py, "manage.py", *cmd], cwd=ROOT, env=env, check=True, capture_output=True, text=True, **kw
        )

    manage("migrate", "--no-input")
    manage("shell", "-c", SEED % {"password": PASSWORD})
    manage("rundispatcher", "--burst", timeout=120)
    # A job still running while the pictures are taken (its progress moves).
    manage("shell", "-c", STAGE)
    port = free_port()
    server = subprocess.Popen(
        [py, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    dispatcher = subprocess.Popen(
        [py, "manage.py", "rundispatcher", "--grace", "1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        shoot(base, chromium, out, widths)
    finally:
        for process in (dispatcher, server):
            process.terminate()
            process.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


def shoot(base, chromium, out, widths):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        for scheme in ("light", "dark"):
            for width in widths if scheme == "light" else [1280]:
                context = browser.new_context(
                    viewport={"width": width, "height": 800}, color_scheme=scheme, locale="en-GB", timezone_id="UTC"
                )
                page = context.new_page()
                page.goto(base + "/admin/login/?next=/admin/")
                page.fill("#id_username", "admin")
                page.fill("#id_password", PASSWORD)
                page.click("input[type=submit]")
                page.wait_for_url("**/admin/")
                suffix = f"{width}" + ("-dark" if scheme == "dark" else "")
                page.goto(base + "/admin/scheduler_app/dashboard/")
                page.wait_for_selector("svg.sched-chart")
                page.screenshot(path=out / f"dashboard-{suffix}.png", full_page=True)
                print(out / f"dashboard-{suffix}.png")
                if scheme == "dark":
                    context.close()
                    continue
                page.goto(base + "/admin/scheduler_app/queue/")
                page.wait_for_selector("svg.sched-chart")
                page.screenshot(path=out / f"queues-{suffix}.png", full_page=True)
                page.goto(base + "/admin/scheduler_app/job/?status__exact=failed")
                page.click("#result_list tbody tr th a")
                page.wait_for_selector(".sched-logbook")
                page.wait_for_timeout(300)
                page.screenshot(
                    path=out / f"job-failed-{suffix}.png", full_page=False
                )  # the first screen: the summary leads
                page.goto(base + "/admin/scheduler_app/job/?status__exact=running")
                page.click("#result_list tbody tr th a")
                page.wait_for_selector(".field-progress_display progress")
                page.wait_for_timeout(1500)
                page.screenshot(path=out / f"job-running-{suffix}.png", full_page=False)
                page.goto(base + "/admin/scheduler_app/job/")
                page.screenshot(path=out / f"jobs-{suffix}.png", full_page=False)
                print(out / f"job-failed-{suffix}.png")
                context.close()
        browser.close()


if __name__ == "__main__":
    random.seed(1)
    main()
