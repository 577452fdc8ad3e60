"""argparse ``type=`` functions shared by the management commands.

Each raises ``argparse.ArgumentTypeError`` with a one-line message; Django's
command parser turns that into ``error: ...`` and exit code 2.
"""

import argparse
import json
import re
from datetime import timedelta

from django.utils.dateparse import parse_datetime

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def json_list(text):
    value = _json(text)
    if not isinstance(value, list):
        raise argparse.ArgumentTypeError(f"expected a JSON list, got {text!r}")
    return value


def json_object(text):
    value = _json(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _json(text):
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid JSON {text!r}: {exc}") from None


def aware_datetime(text):
    try:
        value = parse_datetime(text)
    except ValueError:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(f"invalid ISO 8601 datetime {text!r}")
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"datetime {text!r} needs a UTC offset, e.g. {text}+00:00"
        )
    return value


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


def priority(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid priority {text!r}") from None
    if not -100 <= value <= 100:
        raise argparse.ArgumentTypeError(f"priority must be between -100 and 100, got {value}")
    return value


def duration(text):
    """Parse '90', '90s', '15m', '12h', '14d' or '2w' into a timedelta."""
    match = _DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}; use e.g. 3600, 90s, 15m, 12h, 14d, 2w"
        )
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
