"""The README a newcomer reads: short, its steps in the order the fresh-project test follows
them (``readme.steps``, the same reading), its links alive, its test command CI's."""

import re

from tests.packaging import readme

README = readme.README_PATH.read_text()


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 300


def test_the_steps_are_the_ones_the_fresh_project_test_follows_in_order():
    found = readme.steps()
    files = [(s[0], s[1]) for s in found if s[0] != "run"]
    assert files == [
        ("append", "mysite/settings.py"),
        ("append", "mysite/urls.py"),
        ("write", "billing/tasks.py"),
        ("write", "billing/tests.py"),
        ("write", "billing/test_charge.py"),
    ]
    commands = [s[1] for s in found if s[0] == "run"]
    assert commands[0].startswith("pip wheel") and readme.CHECKOUT in commands[0]
    assert commands[1].startswith("pip install dist/")
    assert "django-admin startapp billing" in commands
    order = ["migrate", "createsuperuser", "charge.enqueue", "rundispatcher", "manage.py test billing", "pytest --ds"]
    positions = [next(i for i, c in enumerate(commands) if word in c) for word in order]
    assert positions == sorted(positions)
    assert f"`{readme.START_PROJECT}`" in README
    assert "manage.py startapp" not in README  # it fails while the settings name the app
    settings = next(s[2] for s in found if s[1] == "mysite/settings.py")
    assert '"scheduler_app",' in settings and '"billing",' in settings and "SchedulerBackend" in settings


def slug(heading):
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_link_into_the_repository_resolves():
    # Written by the workflows' change, merged with this one.
    expected_elsewhere = {"docs/WORKFLOWS.md"}
    for document in [readme.README_PATH, *sorted((readme.ROOT / "docs").glob("*.md"))]:
        text = document.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if "://" in target or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            resolved = (document.parent / path).resolve() if path else document
            if str(resolved.relative_to(readme.ROOT)) in expected_elsewhere:
                continue
            assert resolved.exists(), f"{document.name}: {target}"
            if anchor and resolved.suffix == ".md":
                headings = re.findall(r"^#+ (.*)$", resolved.read_text(), re.M)
                assert anchor in {slug(h) for h in headings}, f"{document.name}: {target}"


def test_ci_runs_the_readmes_test_command():
    assert "```sh\nmake test\n```" in README
    lines = [line for line in (readme.ROOT / ".ci" / "run").read_text().splitlines() if line.strip()]
    assert lines[-1] == "make test"


def test_the_settings_page_lists_every_setting_as_declared():
    import runpy

    script = runpy.run_path(str(readme.ROOT / "scripts" / "settings_table.py"))
    assert script["table"]() in (readme.ROOT / "docs" / "CONFIGURATION.md").read_text()
