"""What a task's outcome writes, made storable on both databases: the one boundary (invariant 13, docs/ARCHITECTURE.md).

A task's return value, its exception (class, message, traceback), the log
records it emits and the progress it reports are the task's own values, so
they may hold anything Python can: NUL characters, lone surrogates (a file
name from ``os.listdir`` that is not UTF-8), megabytes of text, a log level
of 40000. PostgreSQL refuses NUL in text and in JSON (``\\u0000``), lone
surrogates anywhere and numbers past a column's range; SQLite's driver
cannot encode lone surrogates. Unchecked, one such value fails the
statement that records a whole batch of outcomes, again at every retry.

Everything here is pure (standard library only): the dispatcher core, the
worker processes and the Django side call the same functions. The writer
(``lifecycle.finishing.finish_rows`` and ``lifecycle.finishing.log_rows``)
passes every outcome through them before the statement, whoever built the
outcome.
"""

import json
import re

from .bounds import LOG_LEVEL_MAX, LOGGER_MAX

# What replaces a NUL or a lone surrogate in stored text.
REPLACEMENT = "\ufffd"

# Bounds of what an attempt's error entry keeps (characters).
EXCEPTION_CLASS_MAX = 255
MESSAGE_MAX = 2000
TRACEBACK_MAX = 20000

# JobLog's columns: ``level`` is a PositiveSmallIntegerField, ``logger`` a
# CharField (bounds: ``bounds.LOG_LEVEL_MAX``, ``bounds.LOGGER_MAX``).

_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")
# In JSON text made with ensure_ascii (json.dumps's default): a NUL or a
# surrogate escape. Pairs are legal (an emoji is two escapes), so this only
# says "look closer"; :func:`json_text` then cleans the value itself.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def clean_text(text):
    """Return ``text`` with every NUL and lone surrogate replaced by U+FFFD.

    Surrogate pairs (which only ``surrogatepass`` decoding produces) are
    lone too: a Python str holds code points, and a pair of surrogate code
    points is two invalid characters, not one astral one.
    """
    if text.isascii():
        return text if "\x00" not in text else text.replace("\x00", REPLACEMENT)
    if _BAD_CHARS.search(text) is None:
        return text
    return _BAD_CHARS.sub(REPLACEMENT, text)


def clean_value(value):
    """Return JSON-like ``value`` with :func:`clean_text` applied to every string, keys included.

    Iterative (a deeply nested value must not hit the recursion limit);
    lists and dicts are copied, other values kept as they are.
    """
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, (list, tuple, dict)):
        return value
    root = [value]
    stack = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = clean_text(item)
        elif isinstance(item, dict):
            copy = {}
            for k, v in item.items():
                copy[clean_text(k) if isinstance(k, str) else k] = v
            container[key] = copy
            stack.extend((copy, k) for k in copy)
        elif isinstance(item, (list, tuple)):
            copy = list(item)
            container[key] = copy
            stack.extend((copy, i) for i in range(len(copy)))
    return root[0]


def json_text(value):
    """Return ``value`` as JSON text both databases store: no NUL, no lone surrogate.

    Raise what ``json.dumps`` raises for a value that has no JSON form
    (TypeError, ValueError for NaN, RecursionError). The common case costs
    one ``json.dumps`` and one scan of its ASCII output.
    """
    text = json.dumps(value, allow_nan=False)
    if "\\u" in text and _SUSPECT_ESCAPE.search(text) is not None:
        text = json.dumps(clean_value(value), allow_nan=False)
    return text


def clean_json_text(text):
    """Return stored-to-be JSON ``text`` cleaned as :func:`json_text` would have made it."""
    if text is None or ("\\u" not in text and "\x00" not in text and text.isascii()):
        return text
    if _SUSPECT_ESCAPE.search(text) is None and _BAD_CHARS.search(text) is None:
        return text
    return json.dumps(clean_value(json.loads(text)), allow_nan=False)


def error_entry(entry):
    """Return an ``errors`` entry (a dict) with its texts cleaned and bounded."""
    entry = clean_value(entry)
    if isinstance(entry.get("exception_class"), str):
        entry["exception_class"] = entry["exception_class"][:EXCEPTION_CLASS_MAX]
    if isinstance(entry.get("message"), str):
        entry["message"] = entry["message"][:MESSAGE_MAX]
    if isinstance(entry.get("traceback"), str):
        entry["traceback"] = entry["traceback"][-TRACEBACK_MAX:]
    return entry


def log_level(level):
    """Return a log level number the column holds: an int in 0..32767."""
    try:
        level = int(level)
    except (TypeError, ValueError, OverflowError):
        return 0
    return min(max(level, 0), LOG_LEVEL_MAX)


def log_record(record):
    """Return a log row ``(time, level, logger, message, exc_text)`` as the JobLog table stores it.

    The logger name is cleaned first, then cut to its column.
    """
    moment, level, name, message, exc_text = record
    return (
        moment,
        log_level(level),
        clean_text(str(name))[:LOGGER_MAX],
        clean_text(str(message)),
        clean_text(str(exc_text or "")),
    )


# Built once: json.dumps with options builds an encoder per call (on every enqueue's path).
_COMPACT = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def compact_json(value):
    """Return ``value`` as compact JSON text (no spaces, characters as they are)."""
    return _COMPACT.encode(value)


def json_size(value):
    """Return the bytes of ``value`` as compact UTF-8 JSON: what ARGS_MAX_BYTES and RESULT_MAX_BYTES count.

    Raise TypeError or ValueError for a value that is not JSON. Lone
    surrogates count as the three bytes each would take.
    """
    return text_size(compact_json(value))


def text_size(text):
    """Return the UTF-8 bytes of ``text``, a lone surrogate counted as the three bytes it would take."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def utf8_size(text):
    """Return how many bytes ``text`` takes in UTF-8 (a lone surrogate counts as its replacement)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "replace"))
