"""argparse ``type=`` functions shared by the management commands.

Each raises ``argparse.ArgumentTypeError`` with a one-line message; Django's
command parser turns that into ``error: ...`` and exit code 2.
"""

import argparse
import re
from datetime import timedelta

from django.core.exceptions import ValidationError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def rule(rule):
    """Return an argparse type that hands the text to one of the lifecycle's rules.

    The error is the rule's own message, as the API and the admin show it.
    """

    def parse(text):
        try:
            return rule.parse(text)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError(" ".join(exc.messages)) from None

    parse.__name__ = rule.field  # argparse names the type in some messages
    return parse


def seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"seconds must be >= 0, got {text!r}")
    return value


def positive_seconds(text):
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"seconds must be > 0, got {text!r}")
    return value


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid whole number {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def duration(text):
    """Parse '90', '90s', '15m', '12h', '14d' or '2w' into a timedelta."""
    match = _DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}; use e.g. 3600, 90s, 15m, 12h, 14d, 2w"
        )
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
