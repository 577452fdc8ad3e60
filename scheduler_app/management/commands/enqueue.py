from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db import transaction

from ... import lifecycle
from ...lifecycle.building import QUEUE
from ...validation import fields
from ...validation.admission import CONCURRENCY_KEY, EXPIRES_AT, EXPIRES_IN, JOB_CONCURRENCY_LIMIT
from ...validation.labels import META, TAG
from .. import arguments
from ..base import SchedulerCommand


class Command(SchedulerCommand):
    help = "Enqueue one job of a registered task and print its id."

    def add_arguments(self, parser):
        parser.add_argument("task", help="Registered task path (see the admin or GET /api/tasks/).")
        parser.add_argument("--args", dest="job_args", type=arguments.rule(fields.ARGS), default=[], help="JSON list.")
        parser.add_argument(
            "--kwargs", dest="job_kwargs", type=arguments.rule(fields.KWARGS), default={}, help="JSON object."
        )
        when = parser.add_mutually_exclusive_group()
        when.add_argument("--at", type=arguments.rule(fields.EXECUTE_AT), help="ISO 8601 time with offset.")
        when.add_argument(
            "--in",
            dest="delay",
            type=arguments.rule(fields.DELAY),
            help="Seconds from now, or a duration: 90s, 2h, 3d, 1h30m.",
        )
        parser.add_argument("--priority", type=arguments.rule(fields.PRIORITY))
        parser.add_argument("--queue", type=arguments.rule(QUEUE))
        parser.add_argument("--max-attempts", type=arguments.rule(fields.MAX_ATTEMPTS))
        parser.add_argument(
            "--timeout", type=arguments.rule(fields.TIMEOUT), help="Seconds an attempt may run, or a duration (30m)."
        )
        parser.add_argument("--unique-key")
        parser.add_argument(
            "--unique-for",
            type=arguments.rule(fields.UNIQUE_FOR),
            help="Seconds (or a duration: 1d) the unique key stays taken, whatever becomes of the job unless it is cancelled.",
        )
        parser.add_argument(
            "--depends-on",
            type=arguments.rule(fields.DEPENDS_ON),
            metavar="ID[,ID...]",
            help="Ids of jobs that must succeed first.",
        )
        parser.add_argument(
            "--tag", dest="tags", action="append", type=arguments.rule(TAG), help="A tag (repeat for several)."
        )
        parser.add_argument("--meta", type=arguments.rule(META), help="JSON object kept with the job.")
        parser.add_argument(
            "--on-dependency-failure",
            type=arguments.rule(fields.ON_DEPENDENCY_FAILURE),
            help='"cancel" (default) or "run".',
        )
        expiry = parser.add_mutually_exclusive_group()
        expiry.add_argument(
            "--expires-in",
            type=arguments.rule(EXPIRES_IN),
            help='Seconds or a duration ("2h"): not started by then, the job never starts.',
        )
        expiry.add_argument("--expires-at", type=arguments.rule(EXPIRES_AT), help="ISO 8601 time with offset.")
        parser.add_argument(
            "--concurrency-key",
            type=arguments.rule(CONCURRENCY_KEY),
            help="At most --concurrency-limit jobs with this key run at once.",
        )
        parser.add_argument("--concurrency-limit", type=arguments.rule(JOB_CONCURRENCY_LIMIT), help="Default 1.")

        parser.add_argument(
            "--pass-results",
            action="store_true",
            help="Receive the dependencies' results as the first argument (one: itself; several: a list).",
        )

    def handle(self, *args, **options):
        try:
            with transaction.atomic():
                job, created = lifecycle.enqueue(
                    options["task"],
                    options["job_args"],
                    options["job_kwargs"],
                    execute_at=options["at"],
                    delay=options["delay"],
                    priority=options["priority"],
                    queue=options["queue"],
                    max_attempts=options["max_attempts"],
                    timeout=options["timeout"],
                    unique_key=options["unique_key"],
                    unique_for=options["unique_for"],
                    depends_on=options["depends_on"],
                    on_dependency_failure=options["on_dependency_failure"],
                    expires_in=options["expires_in"],
                    expires_at=options["expires_at"],
                    concurrency_key=options["concurrency_key"],
                    concurrency_limit=options["concurrency_limit"],
                    pass_results=options["pass_results"],
                    tags=options["tags"],
                    meta=options["meta"],
                )
                if created:
                    lifecycle.audit.record(
                        "create",
                        via="command",
                        user=lifecycle.audit.command_user(),
                        object_type="job",
                        object_id=job.pk,
                        detail={"task": job.task, "kwargs": job.kwargs},
                    )
        except ValidationError as exc:
            raise CommandError(lifecycle.error_text(exc), returncode=2) from None
        if not created:
            self.stderr.write(f"Job {job.pk} holds unique key {job.unique_key!r}; not creating another.")
        self.stdout.write(str(job.pk))
