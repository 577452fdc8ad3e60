"""The audit trail's one writer: ``record`` an operator's action (who, what, on what, through which door).

Every entry point (admin, API, management commands) calls ``record`` after
the lifecycle call that made the change, inside the same transaction where
the action is one (a single job's cancel, a schedule's edit); a bulk action
that works in batches records once, after its last batch, with the filter
and the count. Arguments and filters go through ``conf.filtered``: the
audit never holds a secret. Each record is also a log line of the
``scheduler_app.audit`` logger, written when the transaction commits.
"""

import getpass
import json
import logging

from django.db import transaction
from django.utils import timezone

from .. import conf
from ..models import AuditEvent, ObjectType, Via

logger = logging.getLogger("scheduler_app.audit")
# How a log line names each door.
DOORS = {Via.ADMIN: "the admin", Via.API: "the API", Via.COMMAND: "a command"}

__all__ = ["ObjectType", "Via", "command_user", "prune", "record"]


def command_user():
    """Return the operating-system user running a management command ("" when it cannot be told)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER (a bare container)
        return ""


def _who(user):
    """Return ``(user or None, username)`` for a Django user, an anonymous one, or a plain name (a command's)."""
    if user is None:
        return None, ""
    if isinstance(user, str):
        return None, user
    if not getattr(user, "is_authenticated", False):
        return None, ""
    return user, user.get_username()


def _json(value):
    """Return ``value`` as plain JSON: datetimes in ISO 8601, durations in seconds, anything else as its text."""
    return json.loads(json.dumps(value, default=_text))


def _text(value):
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "total_seconds"):
        return value.total_seconds()
    return str(value)


def record(action, *, via, object_type, object_id=None, user=None, filter=None, count=1, detail=None, using="default"):
    """Write one audit event and return it; log it on commit.

    ``via`` is "admin", "api" or "command"; ``object_type`` "job",
    "workflow", "queue" or "schedule". One object: ``object_id``; a bulk
    action: ``filter`` (what selected the objects) and ``count`` (how many
    it changed). ``user`` is a Django user, or for a command the name of
    whoever ran it. ``detail``: what else says what happened (an outcome,
    the changed values).
    """
    via, object_type = Via(via), ObjectType(object_type)
    account, username = _who(user)
    event = AuditEvent.objects.using(using).create(
        at=timezone.now(),
        user=account,
        username=username,
        action=action,
        object_type=object_type,
        object_id=None if object_id is None else str(object_id),
        filter=None if filter is None else conf.filtered(_json(filter)),
        count=count,
        via=via,
        detail=conf.filtered(_json(detail or {})),
    )
    target = f"{object_type} {object_id}" if object_id is not None else f"{count} {object_type}s ({event.filter})"
    extra = {"action": action, "via": str(via), "audit_id": event.pk}
    if object_type == ObjectType.JOB and object_id is not None:
        extra["job_id"] = int(object_id)
    transaction.on_commit(
        lambda: logger.info(
            "%s %s through %s by %s%s",
            action,
            target,
            DOORS[via],
            username or "someone",
            f" {event.detail}" if event.detail else "",
            extra=extra,
        ),
        using=using,
    )
    return event


def prune(*, now=None, retention=None, batch=None, using="default"):
    """Delete audit events older than ``AUDIT_RETENTION`` (or ``retention``), at most ``batch``; return the count."""
    now = now or timezone.now()
    cutoff = now - (retention or conf.get("AUDIT_RETENTION"))
    batch = batch or conf.get("PRUNE_BATCH")
    ids = list(
        AuditEvent.objects.using(using).filter(at__lt=cutoff).order_by("at").values_list("pk", flat=True)[:batch]
    )
    if not ids:
        return 0
    deleted, _ = AuditEvent.objects.using(using).filter(pk__in=ids).delete()
    return deleted
