#!/usr/bin/env python
"""Print docs/CONFIGURATION.md's table of SCHEDULER settings, made from ``validation.settings.DECLARED``.

    .venv/bin/python scripts/settings_table.py        # print it
    .venv/bin/python scripts/settings_table.py --write  # replace it in docs/CONFIGURATION.md

``tests/packaging/test_readme_steps.py`` fails when the page's table is not this one.
"""

import sys
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "CONFIGURATION.md"
BEGIN, END = "<!-- settings table: scripts/settings_table.py -->", "<!-- end of the settings table -->"


def shown(value):
    if isinstance(value, timedelta):
        days = value.total_seconds() / 86400
        return f"{days:g} days"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {shown(v)}" for k, v in value.items()) + "}"
    return repr(value)


def table():
    from scheduler_app.validation.settings import DECLARED

    rows = ["| setting | default | meaning | a valid value (system check) |", "|---|---|---|---|"]
    for name, setting in DECLARED.items():
        rule = setting.rule.message.replace("|", "\\|")
        doc = setting.doc.replace("|", "\\|")
        rows.append(f"| `{name}` | `{shown(setting.default)}` | {doc} | {rule} (`{setting.check_id}`) |")
    return "\n".join([BEGIN, *rows, END])


def write():
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    DOC.write_text(text[:start] + table() + text[end:])


if __name__ == "__main__":
    import os

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    write() if "--write" in sys.argv else print(table())
