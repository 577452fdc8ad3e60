from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.management import arguments


class Command(BaseCommand):
    help = "Enqueue one job of a registered task and print its id."

    def add_arguments(self, parser):
        parser.add_argument("task", help="Registered task path (see the admin or GET /api/tasks/).")
        parser.add_argument("--args", dest="job_args", type=arguments.json_list, default=[], help="JSON list.")
        parser.add_argument("--kwargs", dest="job_kwargs", type=arguments.json_object, default={}, help="JSON object.")
        when = parser.add_mutually_exclusive_group()
        when.add_argument("--at", type=arguments.aware_datetime, help="ISO 8601 time with offset.")
        when.add_argument("--in", dest="delay", type=arguments.seconds, help="Seconds from now.")
        parser.add_argument("--priority", type=arguments.priority)
        parser.add_argument("--queue")
        parser.add_argument("--max-attempts", type=arguments.positive_int)
        parser.add_argument("--timeout", type=arguments.positive_seconds)
        parser.add_argument("--unique-key")

    def handle(self, *args, **options):
        execute_at = options["at"]
        if options["delay"] is not None:
            execute_at = timezone.now() + timedelta(seconds=options["delay"])
        try:
            job, created = lifecycle.enqueue(
                options["task"],
                options["job_args"],
                options["job_kwargs"],
                execute_at=execute_at,
                priority=options["priority"],
                queue=options["queue"],
                max_attempts=options["max_attempts"],
                timeout=options["timeout"],
                unique_key=options["unique_key"],
            )
        except ValidationError as exc:
            message = "; ".join(
                f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items()
            )
            raise CommandError(message, returncode=2) from None
        if not created:
            self.stderr.write(
                f"An active job with unique key {job.unique_key!r} exists; not creating another."
            )
        self.stdout.write(str(job.pk))
