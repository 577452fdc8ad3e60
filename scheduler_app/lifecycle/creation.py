"""Create jobs: one (``enqueue``) or many in one transaction (``enqueue_many``).

Every new job, whoever creates it (``my_task.enqueue()``, the admin, the
API, the ``enqueue`` command, a schedule), sends Django's ``task_enqueued``
signal in the creating process once its row is inserted (inside the
caller's transaction, if there is one, as Django's database backend does):
``task_started`` and ``task_finished`` are sent for every job, so every job
gets the whole sequence. A unique key that returns an existing job sends
nothing.
"""

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.tasks import Task
from django.utils import timezone
from django.utils.functional import LazyObject, empty

from .. import conf, sql, taskresults
from ..models import ACTIVE_STATUSES, Job, JobStatus, UniqueWindow
from ..validation.fields import DEPENDS_ON_INDEX
from ..vocabulary.bounds import LINKS_PER_REQUEST_MAX
from ..vocabulary.wakeup import WakeUp
from .announce import announce, job_item, signal_after_commit
from .building import build_job
from .depends_on import order, pass_results, record_failure, start_state, unknown
from .states import BulkValidationError


def enqueue(task, args=(), kwargs=None, *, using="default", **options):
    """Create a job and return ``(job, created)``.

    ``options`` are :func:`~scheduler_app.lifecycle.building.build_job`'s.
    With a ``unique_key`` that an active job already holds, or that a job
    made with ``unique_for`` holds for its period (unless it was
    cancelled), return that job and ``created=False``; the database settles
    races (a partial unique index, a unique window's primary key). With
    ``depends_on`` the job is ``waiting`` until its dependencies succeeded
    (``dependencies``).
    """
    job = build_job(task, args, kwargs, **options)
    sender = task if isinstance(task, Task) else None
    for _ in range(5):
        if job._depends_on or job._unique_for:
            try:
                with transaction.atomic(using=using):
                    [(job, created)] = _create([job], {}, using=using)
            except BulkValidationError as exc:
                raise ValidationError(exc.by_index[0]) from None
            except IntegrityError:
                job.pk, job._state.adding = None, True
                continue
            if created:
                taskresults.send_enqueued([job], sender)
            return job, created
        if job.unique_key:
            existing = _holders([job.unique_key], job.created_at, using).get(job.unique_key)
            if existing is not None:
                return existing, False
        try:
            if job.unique_key or not _insert_and_announce(job, using):
                with transaction.atomic(using=using):
                    job.save(using=using, force_insert=True)
                    announce(jobs=[job], using=using)
            taskresults.send_enqueued([job], sender)
            return job, True
        except IntegrityError:
            if not job.unique_key:
                raise
            job.pk = None
    raise IntegrityError(f"Could not settle unique_key {job.unique_key!r} after retries.")


def _insert_and_announce(job, using):
    """INSERT and NOTIFY in one statement (one round trip outside a transaction); return False where the dialect cannot.

    Same effect as ``save()`` + ``announce`` in a transaction, in a quarter
    of the round trips on PostgreSQL: the enqueue is on the pickup path of
    every job.
    """
    if job.concurrency_key:
        return False  # the template's entry has no key mark: saved and announced as a whole
    prefix, suffix = WakeUp.template(job.execute_at.timestamp(), job.priority, job.queue)
    if not sql.dialect(using).insert_one(
        job, channel=conf.get("NOTIFY_CHANNEL"), payload_parts=(prefix, suffix), using=using
    ):
        return False
    job._state.adding = False
    job._state.db = using
    signal_after_commit(WakeUp.of(jobs=[job_item(job)]), using)
    return True


def enqueue_many(specs, *, created_by=None, max_size=None, using="default"):
    """Create many jobs in one transaction; all or nothing.

    ``specs`` are dicts of ``build_job`` keyword arguments (``task``
    required), plus ``depends_on_index``: indexes of other specs of this
    call the job depends on (in any order; a cycle is an error). Raise
    BulkValidationError with ``{index: errors}`` if any is invalid. A
    ``unique_key`` held by an active job (or a unique window) yields that
    job in place of a new one; two specs with one key is an error.
    ``max_size`` caps the number of specs (the API passes its per-request
    limit); code has none.
    """
    return [job for job, _ in enqueue_many_created(specs, created_by=created_by, max_size=max_size, using=using)]


def enqueue_many_created(specs, *, created_by=None, max_size=None, using="default"):
    """``enqueue_many``, returning ``[(job, created)]``: ``created`` is False for a job that held a key."""
    if max_size is not None and len(specs) > max_size:
        raise ValidationError({"jobs": f"At most {max_size} jobs per request."})
    now = timezone.now()
    defaults = conf.backend_options()
    creator = _unwrapped(created_by)  # a user (cached on each job, its id in the row), a user id, or None
    if creator is None or isinstance(creator, int):
        created_by, creator = creator, None
    else:
        Job().created_by = creator  # the descriptor's checks (a user instance), once per call
        created_by = creator.pk
    cache_creator = Job.created_by.field.set_cached_value
    built, errors, keys, links = [], {}, {}, {}
    memo = {}  # the defaults precedence chose, per task (build_job)
    for index, spec in enumerate(specs):
        spec = dict(spec)
        try:
            links[index] = DEPENDS_ON_INDEX.check(spec.pop("depends_on_index", None) or [])
            task = spec.pop("task")
            spec.setdefault("backend_options", defaults)
            job = build_job(task, created_by=created_by, now=now, _memo=memo, **spec)
            if creator is not None:
                cache_creator(job, creator)
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
                errors[index] = {"unique_key": [f"Same unique_key as job {keys[job.unique_key]} of this request."]}
                continue
            keys[job.unique_key] = index
        built.append(job)
    if errors:
        raise BulkValidationError(errors)
    _bound_links(links, built)
    order(links)
    if any(links.values()) or any(j._depends_on or j._unique_for for j in built):
        with transaction.atomic(using=using):
            results = _create(built, {i: v for i, v in links.items() if v}, using=using)
        taskresults.send_enqueued([job for job, created in results if created])
        return results
    with transaction.atomic(using=using):
        existing = _holders(list(keys), now, using)
        new = [j for j in built if j.unique_key not in existing]
        _bulk_insert(new, using)
        if new:
            announce(jobs=new, using=using)
    taskresults.send_enqueued(new)
    return [(existing[j.unique_key], False) if j.unique_key in existing else (j, True) for j in built]


def _bound_links(links, built):
    """Refuse a request with more than LINKS_PER_REQUEST_MAX dependencies (its own links and existing jobs)."""
    edges = sum(map(len, links.values())) + sum(len(j._depends_on) for j in built)
    if edges > LINKS_PER_REQUEST_MAX:
        raise ValidationError(
            {
                "jobs": f"At most {LINKS_PER_REQUEST_MAX} dependencies (depends_on and depends_on_index entries "
                f"together) per request; this one has {edges}. Split it into several requests."
            }
        )


def _holders(keys, now, using):
    """Return ``{key: job}``: the active job that holds each key, else the job of its live window.

    A window is live until ``expires_at`` unless its job was cancelled (a
    cancelled job frees its key). Every key respects a window, whether or
    not the new job asks for a period of its own. One round trip: the two
    lookups are the branches of a UNION ALL, each served by its own index.
    """
    if not keys:
        return {}
    jobs = Job.objects.using(using).order_by()  # a UNION's branches are not ordered (SQLite refuses)
    windows = UniqueWindow.objects.using(using).filter(key__in=keys, expires_at__gt=now).values("job_id")
    active = jobs.filter(unique_key__in=keys, status__in=ACTIVE_STATUSES)
    windowed = jobs.filter(pk__in=windows).exclude(status=JobStatus.CANCELLED)
    found = {}
    for job in active.union(windowed, all=True).order_by():
        if job.unique_key not in found or job.status in ACTIVE_STATUSES:
            found[job.unique_key] = job
    return found


def _unwrapped(value):
    """The object behind a lazy one (``request.user``), once per call.

    Every attribute read through a ``SimpleLazyObject`` goes through its
    proxy: the user given to ``enqueue_many`` was read that way for every
    job (its id, its type, the cached relation), a fifth of a bulk call.
    """
    if isinstance(value, LazyObject):
        if value._wrapped is empty:
            value._setup()
        return value._wrapped
    return value


# Rows per INSERT: a few thousand per round trip, a document of ~1 MB.
BULK_BATCH = 5000


def _bulk_insert(jobs, using):
    """Insert ``jobs`` and set their ids, in the caller's transaction (one JSON document per batch on PostgreSQL)."""
    for start in range(0, len(jobs), BULK_BATCH):
        batch = jobs[start : start + BULK_BATCH]
        if not sql.dialect(using).insert_many(batch, using=using):
            Job.objects.using(using).bulk_create(batch, batch_size=1000)


def _create(built, links, *, using):
    """Insert the jobs ``built`` with their unique keys and dependencies, in the caller's transaction.

    ``links`` maps an index of ``built`` to the indexes it depends on.
    Return ``[(job, created)]`` in order: a job whose key is held by an
    active job or a unique window is that job. Raise BulkValidationError
    for dependencies that do not exist.
    """
    resolved = {}  # index -> the existing job that holds its key
    keys = [j.unique_key for j in built if j.unique_key]
    held = _holders(keys, min(j.created_at for j in built), using) if keys else {}
    for index, job in enumerate(built):
        if job.unique_key in held:
            resolved[index] = held[job.unique_key]
        elif job._unique_for:
            # The window lasts from this job's making: an earlier holder's is never stretched.
            until = job.created_at + timedelta(seconds=job._unique_for)
            if not sql.take_unique_window(job.unique_key, until=until, now=job.created_at, using=using):
                holder = UniqueWindow.objects.using(using).filter(key=job.unique_key).values_list("job", flat=True)
                resolved[index] = Job.objects.using(using).get(pk=holder.first())
    new = [i for i in range(len(built)) if i not in resolved]
    wanted = {d for i in new for d in built[i]._depends_on}
    wanted |= {resolved[t].pk for i in new for t in links.get(i, ()) if t in resolved}
    statuses = sql.mark_dependencies(wanted, using=using)
    missing = {
        i: {"depends_on": unknown(built[i]._depends_on, known=statuses)}
        for i in new
        if any(d not in statuses for d in built[i]._depends_on)
    }
    if missing:
        raise BulkValidationError(missing)
    causes = {}  # index -> (index of a new job of this request, its status): named once it has an id
    for index in order({i: links.get(i, []) for i in range(len(built))}):
        if index in resolved:
            continue
        job = built[index]
        job.has_dependencies = bool(job._depends_on or links.get(index))
        states = {d: statuses[d] for d in job._depends_on}
        for target in links.get(index, ()):
            if target in resolved:
                states[resolved[target].pk] = statuses[resolved[target].pk]
            else:
                built[target].has_dependents = True
                states[("index", target)] = built[target].status
        cause = start_state(job, states.items())
        if cause is not None:
            dependency, status = cause
            if isinstance(dependency, tuple):
                causes[index] = (dependency[1], status)
            else:
                record_failure(job, dependency, status)
    jobs = [built[i] for i in new]
    _bulk_insert(jobs, using)
    sql.insert_dependencies(
        [
            (built[i].pk, d)
            for i in new
            for d in dict.fromkeys(
                [*built[i]._depends_on, *((resolved.get(t) or built[t]).pk for t in links.get(i, ()))]
            )
        ],
        using=using,
    )
    for index, (target, status) in causes.items():
        record_failure(built[index], built[target].pk, status)
        Job.objects.using(using).filter(pk=built[index].pk).update(errors=built[index].errors)
    for job in jobs:
        if job._unique_for:
            UniqueWindow.objects.using(using).filter(key=job.unique_key).update(job=job)
    pending = [j for j in jobs if j.status == JobStatus.PENDING]
    given = [j.pk for j in pending if j.pass_results and j.has_dependencies]
    if given:  # their dependencies had all succeeded already
        pass_results(given, using=using)
        by_id = {j.pk: j for j in pending}
        for pk, args in Job.objects.using(using).filter(pk__in=given).values_list("pk", "args"):
            by_id[pk].args, by_id[pk].results_passed = args, True
    if pending:
        announce(jobs=pending, using=using)
    return [(resolved[i], False) if i in resolved else (built[i], True) for i in range(len(built))]
