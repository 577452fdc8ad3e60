"""The pure bottom of the app imports no Django: every module of ``vocabulary/`` and ``dispatcher/``.

Imported in a fresh interpreter, with ``scheduler_app``'s public names and
the worker processes' lifeline: if any of them loads Django, a module Django
needs settings for, or anything of the app outside these packages, it fails.
"""

import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "scheduler_app"
PURE = ("vocabulary", "dispatcher")


def pure_modules():
    for package in PURE:
        for path in sorted((APP / package).glob("*.py")):
            name = path.stem
            yield f"scheduler_app.{package}" + ("" if name == "__init__" else f".{name}")


def test_the_pure_packages_import_no_django():
    modules = [*pure_modules(), "scheduler_app.runtime.lifeline"]
    assert len(modules) > 20
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "from scheduler_app import JobCancelled, Snooze, hold_signals_for_dispatcher, options\n"
        + "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
        + "app = sorted(m for m in sys.modules if m.startswith('scheduler_app.') and m.split('.')[1] not in "
        + f"{(*PURE, 'validation', 'runtime')!r})\n"
        + "print(bad, app); sys.exit(1 if bad or app else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
