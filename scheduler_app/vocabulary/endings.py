"""How a task ends its attempt on purpose: ``Snooze`` ("not now") and ``JobCancelled`` ("stopped, as asked").

``Snooze`` (defined in ``validation.durations``: it reads durations such as
"10m"): "not now, try again in a while", without failing.

    from scheduler_app import Snooze

    @task
    def sync(account_id):
        if provider_busy():
            raise Snooze("10m")   # pending again in 10 minutes (or Snooze(600))
        ...

The job goes back to pending at now + seconds; the attempt does not count
against ``max_attempts`` and leaves no ``errors`` entry; the job's
``snoozes`` goes up by one. Past ``SCHEDULER["MAX_SNOOZES"]`` (100) a
snooze fails the attempt instead ("snoozed too often"), so nothing loops
for ever. A task that takes a context may call ``context.snooze(seconds)``.

``JobCancelled``: raised by a task that saw ``context.cancel_requested``,
it ends the job as cancelled.

Pure: no Django (``scheduler_app`` exports both without loading Django).
"""


class JobCancelled(Exception):
    """Raise from a task to end its job as cancelled (after a cancel request)."""
