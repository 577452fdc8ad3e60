"""Log filters that keep ``make run``'s console readable (this project's LOGGING uses them).

The admin's live pages poll every few seconds and the demo tasks talk as
they work: in 13 minutes the console held 512 request lines and 722 demo
lines, and the admin's one-time password scrolled away. What they said is
not lost: a job's own log lines are kept with its attempt (its page in the
admin), and the dispatcher's summary a minute says what ran.
"""

import logging
import re

# The endpoints the admin's pages poll (live lists, a job's live page, the dashboard's and queues' data) and static files.
POLLED = re.compile(r"^[A-Z]+ (\S*/(live|data)/(\?\S*)?|/static/\S*) HTTP/")


class QuietPolling(logging.Filter):
    """Drop the dev server's line for a successful request of a polled endpoint or a static file."""

    def filter(self, record):
        status = getattr(record, "status_code", None)
        line = record.args[0] if isinstance(record.args, tuple) and record.args else None
        return not (status is not None and status < 400 and isinstance(line, str) and POLLED.match(line))


class NoDemoChatter(logging.Filter):
    """Drop the demo tasks' own lines from the console (their jobs' pages keep them)."""

    def filter(self, record):
        return not record.name.startswith("scheduler_app.demo")


class OneLineDemoFailure(logging.Filter):
    """Log the demo's deliberate failure (``scheduler_app.demo.tasks.fail``) without its traceback.

    Django's ``task_finished`` line of a failed task carries the traceback:
    twenty lines that pushed ``make run``'s summary (and the one-time
    password) off the screen. The traceback is on the job's page.
    """

    def filter(self, record):
        args = record.args if isinstance(record.args, tuple) else ()
        if record.name == "django.tasks" and len(args) > 1 and str(args[1]).startswith("scheduler_app.demo."):
            record.exc_info = record.exc_text = None
        return True
