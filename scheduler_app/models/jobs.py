"""Jobs: the row, its statuses, the QuerySet named after them, and the dashboard's proxy.

State changes never happen here: they live in ``scheduler_app.lifecycle``.
The QuerySets only select, and are named after states.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..sql.indexes import LISTED_STATUSES, any_status
from ..sql.readable import (
    error_entries,  # json_reader: what no page shows becomes U+FFFD
    json_reader,
)
from ..vocabulary.bounds import (
    BACKEND_ALIAS_MAX,
    CONCURRENCY_KEY_MAX,
    MAX_ATTEMPTS_MIN,
    PRIORITY_MAX,
    PRIORITY_MIN,
    QUEUE_NAME_MAX,
    TASK_NAME_MAX,
    UNIQUE_KEY_MAX,
    WORKER_ID_MAX,
)
from ..vocabulary.jobs import Status

# The one status type, under the name the models have always exported.
JobStatus = Status

# Not finished: a waiting job (on its dependencies) holds its unique key too.
ACTIVE_STATUSES = Status.ACTIVE
FINISHED_STATUSES = Status.FINISHED


class DependencyFailure(models.TextChoices):
    """What a job does when one of its dependencies fails for good or is cancelled."""

    CANCEL = "cancel", "Cancel it too"
    RUN = "run", "Run it anyway"


def _optional_link(model, **options):
    """Return the link of a job to a ``model`` row most jobs lack (its creator, schedule, workflow).

    Set to NULL when that row is deleted; no index of its own: a partial
    index (``Job.Meta.indexes``, rows that have one) serves it.
    """
    return models.ForeignKey(model, null=True, blank=True, on_delete=models.SET_NULL, db_index=False, **options)


class JobQuerySet(models.QuerySet):
    def pending(self):
        return self.filter(status=JobStatus.PENDING)

    def waiting(self):
        """Jobs waiting on dependencies."""
        return self.filter(status=JobStatus.WAITING)

    def running(self):
        return self.filter(status=JobStatus.RUNNING)

    def active(self):
        # Not ``status__in``: no partial index serves an IN over the table (sql.indexes.any_status).
        return self.filter(any_status(ACTIVE_STATUSES))

    def finished(self):
        return self.filter(status__in=FINISHED_STATUSES)

    def due(self, now=None):
        return self.pending().filter(execute_at__lte=now or timezone.now())

    def in_claim_order(self):
        """Order as the dispatcher claims: priority, then time, then FIFO."""
        return self.order_by("-priority", "execute_at", "id")


class Job(models.Model):
    task = models.CharField(max_length=TASK_NAME_MAX, help_text="Registered task path.")
    args = models.JSONField(default=list, blank=True, decoder=json_reader)
    kwargs = models.JSONField(default=dict, blank=True, decoder=json_reader)
    queue = models.CharField(max_length=QUEUE_NAME_MAX, default="default")
    priority = models.SmallIntegerField(default=0, help_text=f"{PRIORITY_MIN}..{PRIORITY_MAX}; higher runs first.")
    execute_at = models.DateTimeField(default=timezone.now)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=3)
    timeout = models.FloatField(null=True, blank=True, help_text="Seconds an attempt may run; empty: no limit.")
    unique_key = models.CharField(  # noqa: DJ001 - NULL is "no key": the partial unique index leaves those rows out
        max_length=UNIQUE_KEY_MAX,
        null=True,
        blank=True,
        help_text="At most one pending, waiting or running job per key.",
    )
    result = models.JSONField(null=True, blank=True, decoder=json_reader)
    errors = models.JSONField(default=list, blank=True, decoder=json_reader)
    progress = models.JSONField(null=True, blank=True, decoder=json_reader)
    cancel_requested = models.BooleanField(default=False)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # The id of the dispatcher process (its Worker row) that claimed the
    # current or last attempt; not a thread. Part of every attempt's
    # compare-and-set (status, worker, attempts).
    worker = models.CharField(max_length=WORKER_ID_MAX, blank=True, default="")
    created_by = _optional_link(settings.AUTH_USER_MODEL, related_name="+")
    schedule = _optional_link("Schedule", related_name="jobs", help_text="The schedule that created this job.")
    created_at = models.DateTimeField(default=timezone.now)
    # Written explicitly by every lifecycle UPDATE (auto_now does not apply
    # to QuerySet.update); the dispatcher's change poll reads it.
    updated_at = models.DateTimeField(default=timezone.now)
    # The first attempt's start, and the latest attempt's (set by every
    # claim). Rows claimed before last_attempted_at existed have only
    # started_at, which was then the latest attempt's start.
    started_at = models.DateTimeField(null=True, blank=True)
    last_attempted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Log records kept for this job (JobLog rows), kept by the statement that
    # writes them: lists show it without counting rows.
    logs_count = models.PositiveIntegerField(default=0, db_default=0)
    # Snoozes so far (``raise Snooze(seconds)``): an attempt that does not count.
    snoozes = models.PositiveIntegerField(default=0, db_default=0)
    # Dependencies. ``dependencies_left`` counts those that have not yet
    # succeeded; the transaction that finishes the last one makes the job
    # pending. ``has_dependents`` tells a finish that it has more to do (the
    # dispatcher's fast path leaves such jobs to ``lifecycle.finish``).
    depends_on = models.ManyToManyField(
        "self",
        through="JobDependency",
        through_fields=("job", "depends_on"),
        symmetrical=False,
        related_name="dependents",
        blank=True,
    )
    # Database defaults too: rows written in SQL (bulk loads, the benchmarks)
    # need not know these columns.
    on_dependency_failure = models.CharField(
        max_length=8,
        choices=DependencyFailure.choices,
        default=DependencyFailure.CANCEL,
        db_default=DependencyFailure.CANCEL,
    )
    dependencies_left = models.PositiveIntegerField(default=0, db_default=0)
    has_dependencies = models.BooleanField(default=False, db_default=False)
    has_dependents = models.BooleanField(default=False, db_default=False)
    # pass_results: the job receives its dependencies' results as its first
    # argument (one dependency: its result; several: the list in depends_on order).
    pass_results = models.BooleanField(default=False, db_default=False)
    # Set by the transaction that prepended those results to ``args`` (once:
    # a retried job keeps them; one cancelled while waiting gets them later).
    results_passed = models.BooleanField(default=False, db_default=False)
    # The workflow this job belongs to (scheduler_app.workflows), if any.
    workflow = _optional_link("Workflow", related_name="jobs")
    # Operators' labels and free-form data, set at creation.
    tags = models.JSONField(default=list, blank=True, db_default=[], decoder=json_reader)
    meta = models.JSONField(default=dict, blank=True, db_default={}, decoder=json_reader)
    # A job not started by this time never starts (it ends cancelled, "Expired: ...").
    expires_at = models.DateTimeField(null=True, blank=True)
    # At most concurrency_limit jobs with the same key run at once, across every dispatcher.
    concurrency_key = models.CharField(max_length=CONCURRENCY_KEY_MAX, null=True, blank=True)  # noqa: DJ001 - NULL is "no key"
    concurrency_limit = models.PositiveIntegerField(default=1, db_default=1)
    # The scheduler backend (its TASKS alias) a Task enqueued it through:
    # its TaskResults and task signals report it. Empty for jobs made by
    # name (the admin, the API, commands, schedules): they report the task's.
    backend = models.CharField(max_length=BACKEND_ALIAS_MAX, blank=True, default="", db_default="")

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(priority__gte=PRIORITY_MIN, priority__lte=PRIORITY_MAX), name="job_priority_range"
            ),
            models.CheckConstraint(condition=Q(max_attempts__gte=MAX_ATTEMPTS_MIN), name="job_max_attempts_positive"),
            models.CheckConstraint(condition=Q(timeout__isnull=True) | Q(timeout__gt=0), name="job_timeout_positive"),
            models.CheckConstraint(condition=Q(status__in=JobStatus.values), name="job_status_valid"),
            models.UniqueConstraint(
                fields=["unique_key"],
                condition=Q(status__in=ACTIVE_STATUSES, unique_key__isnull=False),
                name="job_unique_key_active",
            ),
        ]
        indexes = [
            # Window load and due counts: pending jobs by time.
            models.Index(
                fields=["execute_at", "id"], condition=Q(status=JobStatus.PENDING), name="job_pending_time_idx"
            ),
            # Claim order: priority first, then time, then FIFO.
            models.Index(
                fields=["-priority", "execute_at", "id"],
                condition=Q(status=JobStatus.PENDING),
                name="job_pending_claim_idx",
            ),
            # PostgreSQL also has job_pending_queue_claim_idx (queue, claim
            # order, pending rows), made by migration 0008 for it alone: see there.
            models.Index(
                fields=["lease_expires_at"], condition=Q(status=JobStatus.RUNNING), name="job_running_lease_idx"
            ),
            # The dispatcher's change poll reads pending rows only; a partial
            # index is not touched when claims and finishes move rows out.
            models.Index(fields=["updated_at"], condition=Q(status=JobStatus.PENDING), name="job_pending_updated_idx"),
            # The admin's and the API's lists filter by queue and task by
            # walking the primary key backwards: no index of their own, so a
            # claim and a finish write none (sql/indexes.py).
            # Columns most jobs leave empty get partial indexes: every claim
            # and finish writes a new row version, and each full index on the
            # table costs an index insertion for each of them.
            models.Index(fields=["unique_key"], condition=Q(unique_key__isnull=False), name="job_unique_key_idx"),
            models.Index(fields=["created_by"], condition=Q(created_by__isnull=False), name="job_created_by_idx"),
            models.Index(fields=["schedule", "id"], condition=Q(schedule__isnull=False), name="job_schedule_idx"),
            models.Index(fields=["finished_at"], condition=Q(status__in=FINISHED_STATUSES), name="job_finished_idx"),
            # Lists by status: only the statuses no hot-path index serves,
            # so the happy path (pending, running, succeeded) writes no entry.
            models.Index(fields=["status", "id"], condition=Q(status__in=LISTED_STATUSES), name="job_status_id_idx"),
            models.Index(fields=["workflow", "id"], condition=Q(workflow__isnull=False), name="job_workflow_idx"),
            # A finish in a workflow asks whether any of its jobs is still active.
            models.Index(
                fields=["workflow"],
                condition=Q(workflow__isnull=False, status__in=["pending", "waiting", "running"]),
                name="job_workflow_active_idx",
            ),
            models.Index(
                fields=["concurrency_key"],
                condition=Q(concurrency_key__isnull=False, status=JobStatus.RUNNING),
                name="job_running_key_idx",
            ),
            # The keyed claim (sql.keys): pending jobs with a key, in claim order.
            models.Index(
                fields=["-priority", "execute_at", "id"],
                condition=Q(concurrency_key__isnull=False, status=JobStatus.PENDING),
                name="job_pending_key_claim_idx",
            ),
            # The expiry sweep: jobs that may still expire, by when.
            models.Index(
                fields=["expires_at"],
                condition=Q(expires_at__isnull=False, status__in=[JobStatus.PENDING, JobStatus.WAITING]),
                name="job_expiring_idx",
            ),
            # Not declared here, made by migrations for one database each
            # (sql/indexes.py): job_created_at_idx (the history's "enqueued",
            # jobs counted by the minute they were made; BRIN on PostgreSQL,
            # a B-tree on SQLite) and job_tags_gin_idx (PostgreSQL, tagged
            # jobs only).
        ]

    def __str__(self):
        return f"#{self.pk} {self.task} ({self.status})"

    @property
    def is_active(self):
        return self.status in ACTIVE_STATUSES

    @property
    def is_finished(self):
        return self.status in FINISHED_STATUSES

    @property
    def attempt_started_at(self):
        """Return when the latest attempt started, or None."""
        return self.last_attempted_at or self.started_at

    @property
    def duration(self):
        """Return the last attempt's run time, or None."""
        start = self.attempt_started_at
        if start and self.finished_at:
            return self.finished_at - start
        return None

    @property
    def worker_ids(self):
        """Return one worker id per attempt (failed attempts, then the current one)."""
        ids = [e["worker"] for e in error_entries(self.errors)]
        if self.attempts > len(ids) and self.worker:
            ids.append(self.worker)
        return ids


class Dashboard(Job):
    """The admin's live dashboard: a proxy with no rows or table of its own.

    It exists so the admin mounts the dashboard like any model (a URL under
    the Scheduler app, an entry on the index) and so it has a permission,
    ``view_dashboard``, of its own.
    """

    class Meta:
        proxy = True
        verbose_name = "Dashboard"
        verbose_name_plural = "Dashboard"
        default_permissions = ("view",)
