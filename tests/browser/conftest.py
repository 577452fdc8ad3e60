"""Browser tests: Debian's chromium driven by Playwright against pytest-django's live_server.

Never `playwright install`: the machine has no internet; the system chromium
is launched by its path. Without chromium the tests skip, unless
REQUIRE_BROWSER=1 (CI), where they fail.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

# Playwright's sync API runs an event loop in this thread; the ORM calls the
# tests make between browser steps are ordinary blocking calls.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

SCREENSHOTS = Path(settings.BASE_DIR) / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def pytest_terminal_summary(terminalreporter):
    if SCREENSHOTS.is_dir() and any(SCREENSHOTS.iterdir()):
        terminalreporter.write_line(f"browser test screenshots: {SCREENSHOTS}")


@pytest.fixture(scope="session")
def chromium_path():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        reason = "chromium is not installed (apt-get install chromium); browser tests need it"
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(reason + " and REQUIRE_BROWSER=1")
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def screenshot_dir():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {SCREENSHOTS}")
    return SCREENSHOTS


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=live_server.url, locale="en-US")
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"


@pytest.fixture
def logged_in(page, superuser):
    """Log in through the admin's login form as a superuser."""
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw-admin-123")
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    return page


@pytest.fixture
def run_dispatcher_burst():
    """Run `manage.py rundispatcher --burst` in a subprocess on the test database."""

    def run(timeout=60):
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "SCHEDULER_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
        }
        env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        return subprocess.run(
            [sys.executable, "manage.py", "rundispatcher", "--burst"],
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run
