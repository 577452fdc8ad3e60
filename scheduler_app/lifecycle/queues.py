"""Queues: their rows (seeded from settings), pause and resume, and their limits.

A queue's row holds what every dispatcher's claim obeys: the pause flag, a
``concurrency_limit`` and a ``rate_limit`` per ``rate_period``. A row is
made from ``SCHEDULER["QUEUES"]`` the first time the queue is seen (a
dispatcher that serves it starts, or someone changes it); after that the
row wins, and the admin and ``PATCH /api/queues/{name}/`` change it. Every
change is announced, so dispatchers re-read the flags at once.
"""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from .. import conf
from ..models import Queue
from ..validation.fields import RATE_PERIOD
from .announce import announce
from .building import QUEUE, QUEUE_RULES

LIMIT_FIELDS = ("concurrency_limit", "rate_limit", "rate_period")


def ensure(names, *, using="default"):
    """Make the rows of queues that have none yet, from the settings; existing rows are left as they are."""
    names = sorted(set(names))
    if not names:
        return
    have = set(Queue.objects.using(using).filter(name__in=names).values_list("name", flat=True))
    now = timezone.now()
    missing = [Queue(name=n, updated_at=now, **conf.queue_defaults(n)) for n in names if n not in have]
    if missing:
        Queue.objects.using(using).bulk_create(missing, ignore_conflicts=True)


def pause_queue(name, *, using="default"):
    return _set_paused(name, True, using)


def resume_queue(name, *, using="default"):
    return _set_paused(name, False, using)


def _set_paused(name, paused, using):
    QUEUE.check(name)
    with transaction.atomic(using=using):
        ensure([name], using=using)
        Queue.objects.using(using).filter(name=name).update(paused=paused, updated_at=timezone.now())
        announce(queues=[name], queues_changed=True, using=using)
    return paused


def paused_queues(using="default"):
    return set(Queue.objects.using(using).filter(paused=True).values_list("name", flat=True))


def limited_queues(using="default"):
    """Return the names of queues with a concurrency or a rate limit."""
    rows = Queue.objects.using(using).exclude(concurrency_limit__isnull=True, rate_limit__isnull=True)
    return set(rows.values_list("name", flat=True))


def check_limits(changes):
    """Return ``changes`` (some of concurrency_limit, rate_limit, rate_period) checked by their rules.

    None means "no limit" (not for ``rate_period``). Raise ValidationError
    keyed by field for bad values and unknown fields.
    """
    errors, checked = {}, {}
    for field, value in changes.items():
        rule = QUEUE_RULES.get(field)
        if rule is None:
            errors[field] = ["Unknown field."]
        elif value is None and rule is not RATE_PERIOD:
            checked[field] = None
        else:
            try:
                checked[field] = rule.check(value)
            except ValidationError as exc:
                errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    return checked


def set_limits(name, *, using="default", **changes):
    """Change queue ``name``'s limits; return its row.

    ``changes`` are some of ``concurrency_limit``, ``rate_limit`` (None: no
    limit) and ``rate_period`` (seconds). Every dispatcher's next claim
    obeys them: the claim reads the row (jobs already running finish).
    """
    QUEUE.check(name)
    changes = check_limits(changes)
    with transaction.atomic(using=using):
        ensure([name], using=using)
        Queue.objects.using(using).filter(name=name).update(**changes, updated_at=timezone.now())
        announce(queues=[name], queues_changed=True, using=using)
    return Queue.objects.using(using).get(name=name)
