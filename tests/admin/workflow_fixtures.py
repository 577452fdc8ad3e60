"""Workflows for the admin's tests, made with the job service (depends_on) and tied to a Workflow row.

The engine (``scheduler_app.workflows``) makes them in real use; these tests
are about what the admin shows and does, so they build the same rows by hand.
"""

from scheduler_app import lifecycle
from scheduler_app.models import Job, Workflow
from tests.plumbing import ADD

OTHER = "tests.testapp.tasks.boom"


def workflow_of(specs, name="nightly-report"):
    """Enqueue ``specs`` (``enqueue_many`` specs, with ``depends_on_index``) as one workflow; return (workflow, jobs)."""
    workflow = Workflow.objects.create(name=name)
    jobs = lifecycle.enqueue_many([{"task": ADD, "args": [1, 2], **spec} for spec in specs])
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(workflow=workflow)
    return workflow, [Job.objects.get(pk=j.pk) for j in jobs]


def chain_of(n, name="a-chain"):
    return workflow_of([{}] + [{"depends_on_index": [i]} for i in range(n - 1)], name=name)


def diamond(name="diamond"):
    """a -> (b, c) -> d: four jobs, four arrows."""
    return workflow_of(
        [{}, {"depends_on_index": [0]}, {"depends_on_index": [0]}, {"depends_on_index": [1, 2]}], name=name
    )


def wide_chord(members, name="big-chord"):
    """``members`` jobs side by side, then one job (another task) that waits for all of them."""
    specs = [{} for _ in range(members)] + [{"task": OTHER, "args": [], "depends_on_index": list(range(members))}]
    return workflow_of(specs, name=name)
