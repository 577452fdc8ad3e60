"""Signals sent by the lifecycle service after a change commits.

``jobs_changed(payload)``: jobs were created, rescheduled, cancelled, or a
queue was paused/resumed. ``payload`` is the same dict a PostgreSQL NOTIFY
carries: ``queues``, and either ``jobs`` ([id, execute_at epoch, priority,
queue]), ``removed`` and ``cancel`` id lists, or ``sync: True``; for a
schedule change, ``schedules`` ([id, next run epoch or null]).
A dispatcher in the same process connects to it to wake at once.
"""

from django.dispatch import Signal

jobs_changed = Signal()
