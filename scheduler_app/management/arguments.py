"""argparse ``type=`` functions shared by the management commands.

Each hands the text to a rule (``validation.fields`` for job fields,
``validation.settings`` for the dispatcher's knobs and durations) and raises
``argparse.ArgumentTypeError`` with the rule's one-line message; the
commands' parser turns that into ``error: ...`` and exit code 2.
"""

import argparse

from django.core.exceptions import ValidationError


def rule(rule):
    """Return an argparse type that hands the text to one of the rules.

    The error is the rule's own message, as the API, the admin and the
    system checks show it.
    """

    def parse(text):
        try:
            return rule.parse(text)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError(" ".join(exc.messages)) from None

    parse.__name__ = rule.field  # argparse names the type in some messages
    return parse
