"""What a job's ending does to the jobs that wait for it, and to its workflow.

The transaction that finishes a dependency settles its dependents
(``settle``): the last success makes a dependent pending (and announces
it), a failure or a cancel cancels it with a reason naming the dependency
(and so on down the chain), unless it was made with
``on_dependency_failure="run"``. Nothing polls: a waiting job costs nothing
until then. Where a new job starts is ``depends_on``.
"""

from .. import sql
from ..models import JobStatus
from .announce import announce
from .depends_on import FAILED_ENDS, pass_results
from .workflows import progress


def settle(ended, *, now, using="default", report=None):
    """Settle the waiting dependents of jobs that ended (``{id: status}``), down the chain; return how many moved.

    Run inside the transaction that ended them. Dependents that become
    pending receive their dependencies' results if made so (:func:`pass_results`)
    and are announced to the dispatchers on commit. The workflows of every
    job that ended here (those given and the dependents cancelled because of
    them) are brought up to date (``workflows.progress``: status, callbacks).
    ``report``, a dict, receives ``{id: status}`` of the dependents that ended.
    """
    ended = {job_id: status for job_id, status in ended.items() if status in (JobStatus.SUCCEEDED, *FAILED_ENDS)}
    everything = dict(ended)
    promoted, moved = [], 0
    while ended:
        rows = sql.settle_dependents(ended, now=now, using=using)
        moved += len(rows)
        promoted += [
            (i, at, p, q, 1) if keyed else (i, at, p, q)
            for i, status, at, p, q, _, keyed in rows
            if status == JobStatus.PENDING and at is not None
        ]
        cancelled = {i: status for i, status, *_ in rows if status == JobStatus.CANCELLED}
        everything |= cancelled
        if report is not None:
            report |= cancelled
        ended = {i: status for i, status, _, _, _, has, _ in rows if status == JobStatus.CANCELLED and has}
    if promoted:
        pass_results([i for i, *_ in promoted], using=using)
        announce(items=promoted, using=using)
    progress(everything, now=now, using=using)
    return moved
