"""The ``scheduler`` fixture for every pytest run in this repository, as a project gets it.

A project gets it from the installed package's ``pytest11`` entry point;
``make``'s virtualenv installs this checkout (editable), so it has the entry
point too. A virtualenv made otherwise (the package not installed) gets the
plugin here. Never both: pytest refuses a plugin registered twice.
"""

import os
from importlib.metadata import entry_points

_installed = any(ep.name == "scheduler_app" for ep in entry_points(group="pytest11"))
if not _installed or os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
    pytest_plugins = ["scheduler_app.testing.pytest_plugin"]
