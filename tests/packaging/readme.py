"""The README's steps, read from the README itself: what the fresh-project test does, word for word.

``steps()`` walks "Add to an existing project" and "Testing your tasks" in
order and returns each step: ``("run", command)`` for every line of a ``sh``
block, ``("write", path, text)`` or ``("append", path, text)`` for a
``python`` block whose paragraph names the file (``Add to the end of
`mysite/settings.py``` appends; ``Write a task in `billing/tasks.py``` and
``In `billing/tests.py``` write). A python block whose paragraph names no file
of the project (the pytest example) or names ``manage.py`` (an optional edit
inside a function) is not a step.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README_PATH = ROOT / "README.md"
SECTIONS = ("Add to an existing project", "Testing your tasks")
# Where the README says to start a new project to try the steps in.
START_PROJECT = "django-admin startproject mysite ."
# The checkout's path, as the README writes it.
CHECKOUT = "/path/to/django-scheduler-app"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
_FILE = re.compile(r"`([\w/]+\.py)`")


def section(text, title):
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def steps(text=None):
    text = README_PATH.read_text() if text is None else text
    found = []
    for title in SECTIONS:
        body = section(text, title)
        position = 0
        for match in _FENCE.finditer(body):
            prose = body[position : match.start()]
            paragraph = prose.strip().split("\n\n")[-1] if prose.strip() else ""
            position = match.end()
            language, code = match.group(1), match.group(2)
            if language == "sh":
                found += [("run", line.strip()) for line in code.splitlines() if line.strip()]
            elif language == "python":
                files = [f for f in _FILE.findall(paragraph) if f != "manage.py"]
                if files:
                    kind = "append" if "to the end of" in paragraph else "write"
                    found.append((kind, files[-1], code))
    return found
