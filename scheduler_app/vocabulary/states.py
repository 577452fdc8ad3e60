"""Every change of a job's status, in one table: from which statuses, to which, and who makes it.

The compare-and-set statements take their conditions from it
(``sql.base.status_in``), and so do the operator's actions and the pages
that offer them (``lifecycle.states``: ``allowed_from``, the refusals):

=====================  ===================  ==========================  =============
change                 from                 to                          by
=====================  ===================  ==========================  =============
claim                  pending              running                     dispatcher
finish                 running              an outcome (or pending)     dispatcher
renew                  running              running (a later lease)     dispatcher
release                running              running (no lease)          dispatcher
take back              running (no lease)   pending, cancelled          dispatcher
rescue                 running              pending, failed, cancelled  leader
expire                 pending, waiting     cancelled                   leader
dependencies met       waiting              pending                     dependencies
dependency failed      waiting              cancelled, pending          dependencies
cancel                 pending, waiting,    cancelled (running: asked   operator
                       running              to stop)
retry                  failed, cancelled    pending, waiting            operator
reschedule             pending, waiting     pending, waiting            operator
run now                pending, waiting     pending, waiting            operator
=====================  ===================  ==========================  =============
"""

from dataclasses import dataclass

from .jobs import Status

DISPATCHER = "dispatcher"  # the dispatcher that claimed the attempt
LEADER = "leader"  # the dispatcher that leads the maintenance
DEPENDENCIES = "dependencies"  # the ending of a job others depend on
OPERATOR = "operator"  # the admin, the API, the commands, django.tasks


@dataclass(frozen=True, slots=True)
class Transition:
    name: str
    sources: tuple[str, ...]
    targets: tuple[str, ...]
    by: str
    done: str = ""  # what the operator's refusal calls it done ("cancelled")


P, W, R = Status.PENDING, Status.WAITING, Status.RUNNING
S, F, C = Status.SUCCEEDED, Status.FAILED, Status.CANCELLED

TRANSITIONS = {
    t.name: t
    for t in (
        Transition("claim", (P,), (R,), DISPATCHER),
        Transition("finish", (R,), Status.OUTCOMES, DISPATCHER),
        Transition("renew", (R,), (R,), DISPATCHER),
        Transition("release", (R,), (R,), DISPATCHER),
        Transition("take back", (R,), (P, C), DISPATCHER),
        Transition("rescue", (R,), (P, F, C), LEADER),
        Transition("expire", (P, W), (C,), LEADER),
        Transition("dependencies met", (W,), (P,), DEPENDENCIES),
        Transition("dependency failed", (W,), (C, P), DEPENDENCIES),
        Transition("cancel", (P, W, R), (C, R), OPERATOR, "cancelled"),
        Transition("retry", (F, C), (P, W), OPERATOR, "retried"),
        Transition("reschedule", (P, W), (P, W), OPERATOR, "rescheduled"),
        Transition("run now", (P, W), (P, W), OPERATOR, "run now"),
    )
}


def sources(name):
    """Return the statuses the change ``name`` starts from."""
    return TRANSITIONS[name].sources
