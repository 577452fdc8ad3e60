"""Secrets in a job's arguments: the values of keyword arguments whose names say "secret".

``redact`` shows them as ``FILTERED``; ``restore`` puts the real values back
where a client echoed ``FILTERED`` (a PATCH of what it read). Names are
compared case-insensitively, at any depth of dicts and lists. Pure: the
names come from the caller (``conf.filtered`` reads the setting).
"""

import json
import re

FILTERED = "[FILTERED]"


def redact(value, names):
    """Return ``value`` with the value of every dict key named in ``names`` (lower case) replaced by ``FILTERED``."""
    if not names:
        return value
    if isinstance(value, dict):
        return {
            key: FILTERED if isinstance(key, str) and key.lower() in names else redact(item, names)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(item, names) for item in value]
    return value


def restore(new, old, names):
    """Return ``new`` where each ``FILTERED`` under a filtered key is ``old``'s value at the same place.

    A filtered key that ``old`` does not have keeps ``FILTERED`` as it is
    (the caller sent it as a value).
    """
    if isinstance(new, list):
        if isinstance(old, list) and len(old) == len(new):
            return [restore(n, o, names) for n, o in zip(new, old, strict=True)]
        return new
    if not names or not isinstance(new, dict):
        return new
    old = old if isinstance(old, dict) else {}
    result = {}
    for key, item in new.items():
        secret = isinstance(key, str) and key.lower() in names
        if secret and item == FILTERED and key in old:
            result[key] = old[key]
        elif isinstance(item, (dict, list)):
            result[key] = restore(item, old.get(key), names)
        else:
            result[key] = item
    return result


# A key of a JSON object in JSON text: a string (escapes included) followed by a colon.
_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:\s*')


def redact_head(text, names):
    """Return the head of a JSON text (a cut preview) ending before the value of its first filtered key.

    A cut text cannot be parsed, so nothing after a filtered key is shown:
    the preview stops there with ``"[FILTERED]"``, and says no more.
    """
    if not names or not isinstance(text, str):
        return text
    for match in _KEY.finditer(text):
        try:
            key = json.loads(f'"{match.group(1)}"')
        except ValueError:
            key = match.group(1)
        if key.lower() in names:
            return f'{text[: match.end()]}"{FILTERED}"'
    return text


def secret_texts(value, names, *, shortest=4):
    """Return the texts (at least ``shortest`` characters) under filtered keys of ``value``, longest first."""
    found = set()

    def walk(item, hidden):
        if isinstance(item, dict):
            for key, child in item.items():
                walk(child, hidden or (isinstance(key, str) and key.lower() in names))
        elif isinstance(item, (list, tuple)):
            for child in item:
                walk(child, hidden)
        elif hidden and isinstance(item, (str, int, float)) and not isinstance(item, bool):
            text = str(item)
            if len(text) >= shortest:
                found.add(text)

    if names:
        walk(value, False)
    return sorted(found, key=len, reverse=True)


def scrub(text, secrets):
    """Return ``text`` with each of ``secrets`` (texts) replaced by ``FILTERED``."""
    if not secrets or not isinstance(text, str):
        return text
    for secret in secrets:
        text = text.replace(secret, FILTERED)
    return text
