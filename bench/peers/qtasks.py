"""django-q2 tasks: plain functions named by dotted path."""

from bench import stamps


def noop():
    return None


def stamp(key, due):
    stamps.record(key, due)
