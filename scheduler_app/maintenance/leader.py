"""Who leads: one live dispatcher at a time holds the ``maintenance`` role, by compare-and-set on its row.

The leader renews its row (``until``: now plus the lease) each time it runs
the maintenance; any other dispatcher checks the row every few seconds and
takes it over, by a compare-and-set that names the old holder, when

* ``until`` passed (the leader stopped renewing: paused, cut off, dead), or
* the leader is gone: its liveness lock (``sql.liveness``) was let go, as
  the database or the kernel does the moment its process ends, so a
  ``kill -9`` hands the role on within one check, not one lease.

A dispatcher that stops gives the role up (``resign``). Two dispatchers
cannot both win one compare-and-set; a leader whose row another took learns
it at its next run and stops leading. Every maintenance service is itself a
compare-and-set, so a moment of overlap (clocks of different hosts) changes
nothing but who did the work.
"""

from datetime import timedelta

from django.db import transaction
from django.db.models import Case, Exists, F, OuterRef, Q, Value, When
from django.utils import timezone

from ..models import Leadership
from ..sql import liveness

ROLE = "maintenance"


class Leader:
    """This dispatcher's side of the role: ``hold(now)`` takes or keeps it, ``resign()`` gives it up."""

    def __init__(self, worker_id, *, lease, using="default", role=ROLE):
        self.worker_id = worker_id
        self.lease = lease
        self.using = using
        self.role = role
        self.leads = False

    def _take(self, now, condition):
        """Compare-and-set: the role is this dispatcher's until ``now + lease`` where ``condition`` holds."""
        rows = Leadership.objects.using(self.using).filter(Q(role=self.role) & condition)
        return bool(
            rows.update(
                worker=self.worker_id,
                until=now + timedelta(seconds=self.lease),
                since=Case(When(worker=self.worker_id, then=F("since")), default=Value(now)),
            )
        )

    def hold(self, now):
        """Take the role or keep it; return whether this dispatcher leads now (``now``: an aware datetime)."""
        me = self.worker_id
        free = Q(worker=me) | Q(worker="") | Q(until__isnull=True) | Q(until__lt=now)
        with transaction.atomic(using=self.using):
            if self._take(now, free):
                self.leads = True
                return True
            holder = (
                Leadership.objects.using(self.using).filter(role=self.role).values_list("worker", flat=True).first()
            )
            if holder is None:
                # No row yet (a new database, or a test's flush): make it, then take it as anyone would.
                Leadership.objects.using(self.using).bulk_create([Leadership(role=self.role)], ignore_conflicts=True)
                self.leads = self._take(now, free)
            else:
                # The holder's process ended: its lock is free (tried in this transaction, let go at its end).
                self.leads = holder in liveness.gone([holder], using=self.using) and self._take(now, Q(worker=holder))
        return self.leads

    def resign(self, now):
        """Give the role up (a stop): the next dispatcher to check takes it at once."""
        if self.leads:
            Leadership.objects.using(self.using).filter(role=self.role, worker=self.worker_id).update(until=now)
            self.leads = False


def current(now, using="default", role=ROLE):
    """Return the worker id that leads ``role`` at ``now``, or None (nobody, or its lease ran out)."""
    row = Leadership.objects.using(using).filter(role=role, until__gte=now).exclude(worker="").first()
    return row.worker if row is not None else None


def with_leader(workers, now=None, role=ROLE):
    """Annotate a ``Worker`` queryset with ``leads``: whether that dispatcher holds ``role`` at ``now`` (one query)."""
    holds = Leadership.objects.filter(role=role, worker=OuterRef("pk"), until__gte=now or timezone.now())
    return workers.annotate(leads=Exists(holds))


def leads(worker):
    """Whether ``worker`` (from ``with_leader``) leads: it holds the role and is alive (the pages' and the API's rule)."""
    return bool(getattr(worker, "leads", False)) and worker.alive
