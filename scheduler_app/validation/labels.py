"""What operators find jobs by: a job's ``tags`` and ``meta``, and ``SCHEDULER["ROUTES"]``.

``TAGS`` and ``META`` are the one rule of each field, used by ``build_job``
(so by the API, ``enqueue()``, the command, the django.tasks backend),
by ``@options(tags=...)`` and by the filters that take a tag (``?tag=``).
``ROUTES`` is the rule of the setting that gives a task's jobs a queue and
a priority by the task's path; :func:`route_of` finds a task's route.
"""

import fnmatch

from django.core.exceptions import ValidationError

from ..vocabulary.bounds import (
    META_MAX_BYTES,
    PRIORITY_MAX,
    PRIORITY_MIN,
    QUEUE_NAME_MAX,
    QUEUE_NAME_RE,
    TAG_MAX,
    TAG_RE,
    TAGS_MAX,
)
from .fields import JSONContainer, Rule, WholeNumber, shown

TAG_SHAPE = f"1 to {TAG_MAX} letters, digits, '_', '.', ':' or '-'"


class Tag(Rule):
    """One tag: ``bounds.TAG_PATTERN``."""

    def __init__(self, field):
        super().__init__(field, f"A tag is {TAG_SHAPE}.")

    @staticmethod
    def well_formed(value):
        return isinstance(value, str) and TAG_RE.fullmatch(value) is not None

    def check(self, value):
        if not self.well_formed(value):
            self.fail(f"{shown(value)} is not a tag: a tag is {TAG_SHAPE}.")
        return value

    def schema(self):
        return {"type": "string", "pattern": TAG_RE.pattern}


class Tags(Rule):
    """Up to ``bounds.TAGS_MAX`` tags; duplicates dropped, order kept. Text: separated by commas or spaces."""

    def __init__(self, field):
        super().__init__(field, f"Must be a list of at most {TAGS_MAX} tags, each {TAG_SHAPE}.")
        self.tag = Tag(field)

    def check(self, value):
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, list):
            self.fail()
        tags = []
        for item in value:
            if self.tag.check(item) not in tags:
                tags.append(item)
        if len(tags) > TAGS_MAX:
            self.fail(f"At most {TAGS_MAX} tags; {len(tags)} given.")
        return tags

    def parse(self, text):
        return self.check(str(text).replace(",", " ").split())

    def schema(self):
        return {"type": "array", "items": self.tag.schema(), "maxItems": TAGS_MAX, "uniqueItems": True}


class Meta(JSONContainer):
    """A JSON object of at most ``bounds.META_MAX_BYTES`` (compact UTF-8, as ``storable.json_size`` counts)."""

    def __init__(self, field):
        super().__init__(field, dict)
        self.message = f"Must be a JSON object of at most {META_MAX_BYTES:,} bytes."

    def check(self, value):
        value, size = self.sized(value)
        if size > META_MAX_BYTES:
            self.fail(f"Takes {size:,} bytes as JSON; at most {META_MAX_BYTES:,}.")
        return value

    def schema(self):
        return {"type": "object", "additionalProperties": {}, "description": self.message}


TAGS = Tags("tags")
META = Meta("meta")
# ``?tag=`` of the job list and of the bulk actions' filter.
TAG = Tag("tag")

ROUTE_KEYS = ("queue", "priority")
ROUTE_PRIORITY = WholeNumber("priority", PRIORITY_MIN, PRIORITY_MAX)


class Routes(Rule):
    """SCHEDULER["ROUTES"]: a list of ``(pattern, {"queue", "priority"})``, or a dict of pattern -> route.

    A pattern is a task path or a glob over it (``"billing.tasks.*"``,
    ``fnmatch``'s syntax); the first that matches a task wins.
    """

    def __init__(self, field):
        super().__init__(
            field, 'Must be a dict (or a list of pairs) of task paths or globs to {"queue": ..., "priority": ...}.'
        )

    def check(self, value):
        pairs = list(value.items()) if isinstance(value, dict) else value
        if not isinstance(pairs, (list, tuple)):
            self.fail()
        for pair in pairs:
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                self.fail()
            pattern, route = pair
            if not isinstance(pattern, str) or not pattern.strip():
                self.fail(f'{shown(pattern)} is not a task path or glob (text, e.g. "billing.tasks.*").')
            if not isinstance(route, dict) or not route:
                self.fail(f"{pattern}: {self.message}")
            unknown = sorted(set(route) - set(ROUTE_KEYS), key=str)
            if unknown:
                self.fail(f"{pattern}: unknown key {shown(unknown[0])}; the keys are queue and priority.")
            queue = route.get("queue")
            if "queue" in route and (not isinstance(queue, str) or not QUEUE_NAME_RE.fullmatch(queue)):
                self.fail(
                    f"{pattern}: queue {shown(queue)} is not a queue name (1 to {QUEUE_NAME_MAX} letters, digits, '_', '.' or '-')."
                )
            if "priority" in route:
                try:
                    ROUTE_PRIORITY.check(route["priority"])
                except ValidationError as exc:
                    self.fail(f"{pattern}: priority: {' '.join(exc.messages)}")
        return [tuple(pair) for pair in pairs]


ROUTES = Routes("ROUTES")


def route_of(task_name, routes):
    """Return the route (a dict) of the first pattern of ``routes`` that matches ``task_name``, or {}."""
    for pattern, route in routes.items() if isinstance(routes, dict) else routes:
        if pattern == task_name or fnmatch.fnmatchcase(task_name, pattern):
            return route
    return {}
