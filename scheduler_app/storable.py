"""Text both databases store and every page can show: NUL and lone surrogates become U+FFFD.

PostgreSQL refuses NUL in text and in jsonb; a lone surrogate cannot be
encoded as UTF-8, so a page or a JSON document holding one fails as a
whole. ``clean_text`` and ``clean_value`` replace each of them by U+FFFD
(the replacement character) and leave everything else as it is.

Pure: no Django.
"""

import re

REPLACEMENT = "\ufffd"
# NUL, and any surrogate code point: a Python str holds a pair as one
# character, so a surrogate in one is always alone (a pair split in two is two).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Return ``text`` with each NUL character and lone surrogate replaced by U+FFFD."""
    if text.isascii() and "\x00" not in text:
        return text
    return _UNSTORABLE.sub(REPLACEMENT, text) if _UNSTORABLE.search(text) else text


def _clean(item):
    if isinstance(item, str):
        return clean_text(item)
    return item


def clean_value(value):
    """Return JSON-like ``value`` with every text (dict keys included) cleaned by ``clean_text``.

    Lists, tuples and dicts are copied; anything else is returned as it is.
    Iterative: a document nested deeper than the recursion limit is cleaned too.
    """
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, (dict, list, tuple)):
        return value
    root = [value]
    # (source container, copy to fill): children are copied before they are filled.
    stack = [(value, root, 0)]
    while stack:
        source, parent, slot = stack.pop()
        if isinstance(source, dict):
            copy = {}
            parent[slot] = copy
            for key, child in source.items():
                key = _clean(key)
                if isinstance(child, (dict, list, tuple)):
                    copy[key] = None
                    stack.append((child, copy, key))
                else:
                    copy[key] = _clean(child)
        else:
            copy = [None] * len(source)
            parent[slot] = copy
            for index, child in enumerate(source):
                if isinstance(child, (dict, list, tuple)):
                    stack.append((child, copy, index))
                else:
                    copy[index] = _clean(child)
    return root[0]
