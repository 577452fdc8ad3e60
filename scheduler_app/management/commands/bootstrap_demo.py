import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.utils import timezone

from ... import lifecycle
from ...models import Job

DEMO = "scheduler_app.demo.tasks."


class Command(BaseCommand):
    help = (
        "For `make run`: create a local staff user if none exists (DEBUG only; the "
        "credentials are printed once) and enqueue demo jobs if the table is empty."
    )

    def handle(self, *args, **options):
        User = get_user_model()
        staff = User.objects.filter(is_staff=True, is_active=True).order_by("-is_superuser", "pk").first()
        if staff is not None:
            # A later run: the password was shown once, at the first; say how to set one.
            name = staff.get_username()
            self.stdout.write(
                f"Log in as {name} (its password was shown once, at the first `make run`; "
                f"to set a new one: .venv/bin/python manage.py changepassword {name})."
            )
        elif not User.objects.filter(is_staff=True).exists():
            if settings.DEBUG:
                password = secrets.token_urlsafe(12)
                User.objects.create_superuser("admin", "admin@localhost", password)
                self.stdout.write(
                    self.style.SUCCESS(
                        f"Log in as admin, password {password} (made now and shown once; change it in the admin)."
                    )
                )
            else:
                self.stdout.write("No staff user exists; create one with `python manage.py createsuperuser`.")
        if Job.objects.exists():
            return
        now = timezone.now()
        demo = [
            ("noop", [], {}, 0, 0),
            ("echo", ["hello"], {"from": "make run"}, 5, 10),
            ("progress", [], {"steps": 20, "delay": 0.5}, 0, 3),
            ("sleep", [], {"seconds": 5}, 0, 1),
            ("fail", ["demo failure: watch it retry with backoff"], {}, -10, 2),
            ("async_sleep", [], {"seconds": 0.2}, 0, 15),
            ("echo", ["high priority"], {}, 50, 20),
            ("echo", ["in five minutes"], {}, 0, 300),
        ]
        for name, args, kwargs, priority, delay in demo:
            lifecycle.enqueue(DEMO + name, args, kwargs, priority=priority, execute_at=now + timedelta(seconds=delay))
        self.stdout.write(f"Enqueued {len(demo)} demo jobs.")
