"""Writing how attempts ended: the finish statement, and what happens when the database refuses it.

Every outcome reaches the database through :func:`finish` or a claim that
records outcomes (:func:`with_outcomes`): the one boundary where a task's
values are made storable (``storable``, invariant 13 of docs/ARCHITECTURE.md), and where a
batch the database still refuses is written row by row, so that one value
fails its own job and nothing else.
"""

import logging

from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from .. import sql
from ..sql.connections import TRANSIENT_ERRORS as PG_TRANSIENT_ERRORS
from ..vocabulary import storable
from ..vocabulary.policy import RetryPolicy
from .dependencies import settle

logger = logging.getLogger(__name__)

# Errors that say the database is unreachable now: the caller keeps the
# outcomes and tries again. Any other refusal is the values' (invariant 13).
TRANSIENT_ERRORS = (OperationalError, InterfaceError, *PG_TRANSIENT_ERRORS)


def with_outcomes(statement, finished, now, using):
    """Run ``statement(outcomes)`` (a finish+claim); return ``(won, *the rest of what it returns)``.

    ``won`` maps the ids of the outcomes that won to the status each job was
    left in, those that others depend on included (:func:`_finish_rest`).
    When the database refuses the statement for a reason other than being
    unreachable, the outcomes are written one by one (:func:`finish`) and the
    statement runs again without them: one unstorable value never holds up
    the claim, the batch or the dispatcher (invariant 13).
    """
    try:
        won, *rest = statement(finished)
    except Exception as exc:
        if not finished or is_transient(exc):
            raise
        logger.warning(
            "the database refused a batch of %d outcomes (%s); writing them one by one",
            len(finished),
            _reason(exc),
            extra={"action": "finish_refused"},
        )
        won = _finish_each(finished, now, using)
        _, *rest = statement([])
        return (won, *rest)
    won |= _finish_rest(finished, won, now, using)
    return (won, *rest)


def finish(outcomes, *, now=None, connection=None, using="default"):
    """Record how claimed attempts ended; return the ids of the outcomes that won.

    An outcome whose attempt is no longer the job's running attempt (it was
    rescued, and perhaps claimed again) changes nothing and is not returned.
    A job whose cancel was requested ends cancelled unless it succeeded
    (``vocabulary.jobs.attempt_end``, in SQL). One statement for the batch (and one
    more for jobs others depend on); when the database refuses it for a
    reason other than being unreachable, each outcome is written on its own,
    and one that still cannot be stored fails its own job with the reason
    (invariant 13). ``connection``, a psycopg connection to the same
    PostgreSQL database (the dispatcher's own), runs the batch's statement
    as a prepared statement (as :func:`transitions.claim` does).
    """
    return set(finish_outcomes(outcomes, now=now, connection=connection, using=using))


def finish_outcomes(outcomes, *, now=None, using="default", cascaded=None, connection=None):
    """As :func:`finish`; return ``{id: status it was left in}`` of the outcomes that won.

    ``cascaded``, a dict, receives ``{id: status}`` of the dependents that
    ended because of these outcomes (cancelled by a failure), which are not
    outcomes of their own (``testing.drain`` counts them).
    """
    outcomes = list(outcomes)
    if not outcomes:
        return {}
    now = now or timezone.now()
    try:
        won = _finish_batch(outcomes, now, using, cascaded, connection)
    except Exception as exc:
        if is_transient(exc):
            raise
        if len(outcomes) > 1:
            logger.warning(
                "the database refused a batch of %d outcomes (%s); writing them one by one",
                len(outcomes),
                _reason(exc),
                extra={"action": "finish_refused"},
            )
        won = _finish_each(outcomes, now, using, cascaded)
    report_lost(outcomes, won)
    return won


def _finish_batch(outcomes, now, using, cascaded=None, connection=None):
    won = sql.dialect(using).finish(
        finish_rows(outcomes), now=now, logs=log_rows(outcomes), connection=connection, using=using
    )
    won |= _finish_rest(outcomes, won, now, using, cascaded)
    return won


def _finish_each(outcomes, now, using, cascaded=None):
    """Write ``outcomes`` one at a time; an outcome the database refuses is replaced by the failure that says why.

    Return ``{id: status}`` of those that won. A replacement that is refused
    too is dropped (and logged): its job's lease is no longer renewed
    (the loop renews only what it still runs), so a rescue takes it back.
    Transient errors (the database is unreachable) propagate: the caller
    keeps the outcomes and tries again.
    """
    won = {}
    for outcome in outcomes:
        try:
            won |= _finish_batch([outcome], now, using, cascaded)
            continue
        except Exception as exc:
            if is_transient(exc):
                raise
            reason = _reason(exc)
        logger.error(
            "job %s: the database refused to store the outcome of attempt %d (%s); the attempt is recorded as failed",
            outcome.job_id,
            outcome.attempt,
            reason,
            extra={"job_id": outcome.job_id, "action": "outcome_unstorable"},
        )
        replacement = RetryPolicy.unstorable(outcome, reason, now)
        try:
            won |= _finish_batch([replacement], now, using, cascaded)
        except Exception as exc:
            if is_transient(exc):
                raise
            logger.error(
                "job %s: not even the failure of attempt %d could be stored (%s); "
                "its lease will expire and a dispatcher will take it back",
                outcome.job_id,
                outcome.attempt,
                _reason(exc),
                extra={"job_id": outcome.job_id, "action": "outcome_dropped"},
            )
    return won


# SQLSTATE classes that PostgreSQL reports as an OperationalError but that a
# value causes (54: a program limit, such as a jsonb value past its size).
_VALUE_CLASSES = ("22", "23", "54")


def is_transient(exc):
    """Return whether ``exc`` says the database is unreachable now (try again), not that it refused a value."""
    if not isinstance(exc, TRANSIENT_ERRORS):
        return False
    state = getattr(exc, "sqlstate", None) or getattr(exc.__cause__, "sqlstate", None)
    return not (isinstance(state, str) and state[:2] in _VALUE_CLASSES)


def _reason(exc):
    """Return the first line of a database error's message, storable and short."""
    text = storable.clean_text(str(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:500] if text else ''}".rstrip(": ")


def _finish_rest(outcomes, won, now, using, cascaded=None):
    """Finish the outcomes the plain statement left alone, settling dependents; return ``{id: status}`` of those that won.

    The plain finish skips jobs that others depend on; they are finished
    here, in a transaction with the statement that settles their dependents
    (``dependencies.settle``): a dependent becomes pending in the same
    transaction that finishes its last dependency. Outcomes that lose here
    too were taken back by a rescue.
    """
    rest = [o for o in outcomes if o.job_id not in won]
    if not rest:
        return {}
    with transaction.atomic(using=using):
        won_here = sql.dialect(using).finish(
            finish_rows(rest), now=now, dependents=True, logs=log_rows(rest), using=using
        )
        settle(won_here, now=now, using=using, report=cascaded)
    return won_here


def report_lost(outcomes, won):
    lost = [o.job_id for o in outcomes if o.job_id not in won]
    if lost:
        logger.warning(
            "results of %d attempts arrived after the attempt was taken back "
            "(lease expired) and were discarded: jobs %s",
            len(lost),
            lost[:20],
            extra={"action": "finish_lost"},
        )


def finish_rows(outcomes):
    """Return the finish statement's rows: what each outcome writes, made storable (``storable``).

    The one boundary between a task's values and the database: whoever built
    the outcome (a worker thread, a worker process, ``testing.drain``), its
    result, error and log records pass here on their way to the statement.
    """
    return [
        (
            o.job_id,
            o.worker,
            o.attempt,
            str(o.status),
            storable.clean_json_text(o.result_json),
            storable.json_text(storable.error_entry(o.error)) if o.error is not None else None,
            o.retry_at,
            len(o.logs),
            o.snoozed,
        )
        for o in outcomes
    ]


def log_rows(outcomes):
    """Return ``(job id, attempt, seq, time, level, logger, message, exc_text)`` for every kept log record, storable.

    Numbered after the records written while the attempt ran (``logs_before``).
    """
    return [
        (o.job_id, o.attempt, seq, *storable.log_record(record))
        for o in outcomes
        for seq, record in enumerate(o.logs, o.logs_before + 1)
    ]
