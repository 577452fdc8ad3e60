"""The README's "Add to an existing project" and "Testing your tasks" say exactly what the
fresh-project test does: each file the test writes stands in the README, line for line."""

from pathlib import Path

import pytest

from tests.packaging.test_fresh_project import BILLING_TASKS, BILLING_TESTS, SETTINGS_ADDITIONS, URLS_ADDITION

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def lines(text):
    return [line.strip() for line in text.strip().splitlines() if line.strip()]


@pytest.mark.parametrize("snippet", [SETTINGS_ADDITIONS, URLS_ADDITION, BILLING_TASKS, BILLING_TESTS])
def test_the_readme_shows_what_the_test_does(snippet):
    text, wanted = lines(README), lines(snippet)
    starts = [i for i, line in enumerate(text) if line == wanted[0]]
    assert any(text[i : i + len(wanted)] == wanted for i in starts), "\n".join(wanted)


def test_the_readme_names_the_steps_in_order():
    order = ["pip install django-scheduler-app", "INSTALLED_APPS += [", 'include("scheduler_app.urls")',
             "manage.py migrate", "manage.py rundispatcher", "scheduler_app.testing"]
    positions = [README.index(step) for step in order]
    assert positions == sorted(positions)
