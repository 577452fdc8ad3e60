#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""
import os
import sys


def main():
    if sys.argv[1:2] == ["rundispatcher"]:
        # Hold SIGTERM/SIGINT while Django starts, so that a stop sent at any
        # moment ends the dispatcher gracefully (exit 0). A module without Django.
        from scheduler_app.dispatcher.shutdown import install_early

        install_early()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
