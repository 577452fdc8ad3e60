import argparse

from django.core.management.base import CommandError

from ... import conf, lifecycle
from ...models import FINISHED_STATUSES, Job
from ...validation.settings import RETENTION_AGE, SETTINGS
from .. import arguments
from ..base import SchedulerCommand


def status_list(text):
    statuses = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in statuses if s not in FINISHED_STATUSES]
    if bad or not statuses:
        raise argparse.ArgumentTypeError(
            f"invalid status {', '.join(bad) or text!r}; choose from {', '.join(FINISHED_STATUSES)}"
        )
    return statuses


class Command(SchedulerCommand):
    help = (
        "Delete finished jobs older than the retention (SCHEDULER['RETENTION'], by status) or --older-than, in batches."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than",
            type=arguments.rule(RETENTION_AGE),
            help="Age of finished jobs to delete, e.g. 7d, 12h, 30m, 90s, 3600 (default: the retention setting).",
        )
        parser.add_argument(
            "--status",
            type=status_list,
            action="extend",
            help="Finished status(es), comma-separated or repeated (default: all finished).",
        )
        parser.add_argument("--batch-size", type=arguments.rule(SETTINGS["PRUNE_BATCH"]), default=None)
        parser.add_argument("--dry-run", action="store_true", help="Count, delete nothing.")

    def handle(self, *args, **options):
        statuses = options["status"] or list(FINISHED_STATUSES)
        retention = conf.get("RETENTION")
        if options["older_than"] is not None:
            retention = dict.fromkeys(statuses, options["older_than"])
        else:
            retention = {s: age for s, age in retention.items() if s in statuses}
        if options["dry_run"]:
            from django.utils import timezone

            now = timezone.now()
            count = sum(Job.objects.filter(status=s, finished_at__lt=now - age).count() for s, age in retention.items())
            self.stdout.write(f"{count} finished jobs would be deleted.")
            return
        try:
            deleted = lifecycle.prune(retention=retention, batch=options["batch_size"])
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        lifecycle.audit.record(
            "prune",
            via="command",
            user=lifecycle.audit.command_user(),
            object_type="job",
            filter={f"{status}_older_than": age.total_seconds() for status, age in retention.items()},
            count=deleted,
        )
        self.stdout.write(f"Deleted {deleted} finished jobs.")
