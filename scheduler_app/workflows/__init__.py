"""Workflows in code: ``step``, ``chain``, ``group``, ``chord`` (Celery's canvas), and ``Workflow``.

    from scheduler_app.workflows import chain, chord, group, step, Workflow

    wf = chain(step(fetch, url), step(parse), group(step(index), step(thumbnail))).enqueue(name="page")
    wf = chord(group(step(count, "a"), step(count, "b")), step(total)).enqueue()

    with Workflow(name="nightly", on_success=step(report), on_failure=step(alert)) as wf:
        export.enqueue(day)          # any API: task.enqueue(), enqueue, enqueue_many, steps
        cleanup.enqueue()

A step that runs after others receives their results as its first
positional argument (the result itself after one step, the list in order
after a group); ``.immutable()`` receives none. ``.enqueue()`` creates every
job in one transaction and returns the ``Workflow`` (a model: ``id``,
``name``, ``status``, ``jobs``). The engine is ``scheduler_app.lifecycle``
(``workflows``, ``dependencies``).
"""

from ..models import Workflow, WorkflowStatus
from .canvas import Chain, Chord, Group, Step, chain, chord, group, step

__all__ = ["Chain", "Chord", "Group", "Step", "Workflow", "WorkflowStatus", "chain", "chord", "group", "step"]
