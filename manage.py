#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main():
    # A SIGTERM while `rundispatcher` starts stops it gracefully (no Django here).
    from scheduler_app import hold_signals_for_dispatcher

    hold_signals_for_dispatcher(sys.argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
