"""Signals sent by the lifecycle service after a change commits.

``jobs_changed(message)``: jobs were created, rescheduled, cancelled, or a
queue was paused or resumed, or a schedule changed. ``message`` is a
``scheduler_app.vocabulary.wakeup.WakeUp``, the same message a PostgreSQL
NOTIFY carries (its wire format is documented there). A dispatcher in the
same process connects to it to wake at once.

``workflow_closed(workflow, using)``: see below.
"""

from django.dispatch import Signal

jobs_changed = Signal()

# ``workflow_closed(workflow, using)``: a ``with Workflow(...)`` block ended
# without an exception, inside its transaction. ``lifecycle.workflows.closed``
# receives it, connected in ``apps.py`` (models cannot call the service: they
# are below it).
workflow_closed = Signal()
