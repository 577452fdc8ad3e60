"""Whether a value can be stored as JSON text by both databases (``fields`` re-exports these)."""

import math

from ..vocabulary.bounds import JSON_DEPTH_MAX

# JSON schema (ECMA 262) of text without NUL characters, which no database stores.
NO_NUL = "^[^\\u0000]*$"


def json_problem(value, *, max_depth=JSON_DEPTH_MAX):
    """Return why ``value`` cannot be stored as JSON text, or None.

    Catches what JSON parsers let through but the databases refuse (NUL
    characters in PostgreSQL's jsonb, lone surrogates in UTF-8), values that
    are not JSON (objects, NaN), and nesting deep enough to exhaust the
    recursion limit of whatever reads the document later.
    """
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"Nested more than {max_depth} levels deep."
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return "Object keys must be text."
                stack.append((key, depth))
                stack.append((child, depth + 1))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "Text may not contain NUL (\\u0000) characters."
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "Text may not contain lone surrogate characters."
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "Numbers must be finite (no NaN or Infinity)."
        elif item is None or isinstance(item, (bool, int)):
            pass
        else:
            return f"Must be JSON: {type(item).__name__} values cannot be stored."
    return None
