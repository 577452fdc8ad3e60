"""Create jobs: one (``enqueue``) or many in one transaction (``enqueue_many``).

Every new job, whoever creates it (``my_task.enqueue()``, the admin, the
API, the ``enqueue`` command, a schedule), sends Django's ``task_enqueued``
signal in the creating process once its row is inserted (inside the
caller's transaction, if there is one, as Django's database backend does):
``task_started`` and ``task_finished`` are sent for every job, so every job
gets the whole sequence. A unique key that returns an existing job sends
nothing.
"""

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.tasks import Task
from django.utils import timezone

from .. import conf, sql, taskresults
from ..dispatcher.wakeup import WakeUp
from ..models import Job
from .announce import announce, job_item, signal_after_commit
from .states import BulkValidationError
from .validation import build_job


def enqueue(task, args=(), kwargs=None, *, using="default", **options):
    """Create a pending job and return ``(job, created)``.

    ``options`` are :func:`~scheduler_app.lifecycle.validation.build_job`'s.
    With a ``unique_key`` that an active job already holds, return that job
    and ``created=False``; the database's partial unique index settles races.
    """
    job = build_job(task, args, kwargs, **options)
    for _ in range(5):
        if job.unique_key:
            existing = Job.objects.using(using).active().filter(unique_key=job.unique_key).first()
            if existing is not None:
                return existing, False
        try:
            if not job.unique_key and sql.is_postgres(using):
                _insert_and_announce(job, using)
            else:
                with transaction.atomic(using=using):
                    job.save(using=using, force_insert=True)
                    announce(jobs=[job], using=using)
            taskresults.send_enqueued([job], task if isinstance(task, Task) else None)
            return job, True
        except IntegrityError:
            if not job.unique_key:
                raise
            job.pk = None
    raise IntegrityError(f"Could not settle unique_key {job.unique_key!r} after retries.")


def _insert_and_announce(job, using):
    """PostgreSQL: INSERT and NOTIFY in one statement (one round trip outside a transaction).

    Same effect as ``save()`` + ``announce`` in a transaction, in a quarter
    of the round trips: the enqueue is on the pickup path of every job.
    """
    prefix, suffix = WakeUp.template(job.execute_at.timestamp(), job.priority, job.queue)
    job.pk = sql.pg_insert_and_notify(
        job, channel=conf.get("NOTIFY_CHANNEL"), payload_parts=(prefix, suffix), using=using
    )
    job._state.adding = False
    job._state.db = using
    signal_after_commit(WakeUp.of(jobs=[job_item(job)]), using)


def enqueue_many(specs, *, created_by=None, max_size=None, using="default"):
    """Create many jobs in one transaction; all or nothing.

    ``specs`` are dicts of ``build_job`` keyword arguments (``task``
    required). Raise BulkValidationError with ``{index: errors}`` if any is
    invalid. A ``unique_key`` held by an active job yields that job in place
    of a new one; two specs with one key is an error. ``max_size`` caps the
    number of specs (the API passes its per-request limit); code has none.
    """
    if max_size is not None and len(specs) > max_size:
        raise ValidationError({"jobs": f"At most {max_size} jobs per request."})
    now = timezone.now()
    built, errors, keys = [], {}, {}
    for index, spec in enumerate(specs):
        spec = dict(spec)
        try:
            task = spec.pop("task")
            job = build_job(task, created_by=created_by, now=now, **spec)
        except KeyError:
            errors[index] = {"task": ["This field is required."]}
            continue
        except TypeError as exc:
            errors[index] = {"non_field_errors": [str(exc)]}
            continue
        except ValidationError as exc:
            errors[index] = exc.message_dict
            continue
        if job.unique_key:
            if job.unique_key in keys:
                errors[index] = {
                    "unique_key": [f"Same unique_key as job {keys[job.unique_key]} of this request."]
                }
                continue
            keys[job.unique_key] = index
        built.append(job)
    if errors:
        raise BulkValidationError(errors)
    with transaction.atomic(using=using):
        existing = {}
        if keys:
            existing = {
                j.unique_key: j
                for j in Job.objects.using(using).active().filter(unique_key__in=list(keys))
            }
        new = [j for j in built if j.unique_key not in existing]
        Job.objects.using(using).bulk_create(new, batch_size=1000)
        if new:
            announce(jobs=new, using=using)
    taskresults.send_enqueued(new)
    return [existing.get(j.unique_key, j) if j.unique_key else j for j in built]
