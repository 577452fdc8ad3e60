"""The canvas: steps, and how chains, groups and chords become jobs linked by their dependencies.

A canvas is laid out as the jobs of one ``enqueue_many`` call: each step is
a job spec, and a step placed after others depends on them
(``depends_on_index``, in order) and receives their results
(``pass_results``) unless it is immutable. Placing a node after ``after``
(spec indexes) returns its tails: the indexes whose results the next node
receives (a step: itself; a chain: its last node's; a group: its members',
in order; a chord: its body's).
"""

from datetime import datetime, timedelta

from django.tasks import Task

from .. import registry
from ..lifecycle.creation import enqueue_many
from ..lifecycle.workflows import create_workflow
from ..models.workflows import current_workflow

# Task.using's names and the job fields they set (others are build_job's own).
_RENAMED = {"queue_name": "queue", "run_after": "execute_at"}
_OPTIONS = {
    "priority",
    "queue",
    "execute_at",
    "delay",
    "max_attempts",
    "timeout",
    "unique_key",
    "unique_for",
    "on_dependency_failure",
    "tags",
    "meta",
    "concurrency_key",
    "concurrency_limit",
    "expires_in",
    "expires_at",
}


class Node:
    """Something that can be placed in a workflow and enqueued as one."""

    def place(self, specs, after):
        raise NotImplementedError

    def specs(self):
        """Return this canvas as ``enqueue_many`` specs (the links as ``depends_on_index``)."""
        specs = []
        self.place(specs, [])
        return specs

    def enqueue(self, *, name="", on_success=None, on_failure=None, on_finish=None, created_by=None, using="default"):
        """Create every job of this canvas in one transaction; return the Workflow.

        Inside a ``with Workflow(...)`` block the jobs join that workflow
        (which is returned; the block's callbacks are the ones that run).
        """
        current = current_workflow()
        if current is not None:
            if name or on_success or on_failure or on_finish:
                raise TypeError(
                    "Inside a `with Workflow(...)` block the block's name and callbacks apply; give them there."
                )
            enqueue_many(self.specs(), created_by=created_by, using=using)
            return current
        callbacks = {"on_success": on_success, "on_failure": on_failure, "on_finish": on_finish}
        workflow, _ = create_workflow(self.specs(), name=name, callbacks=callbacks, created_by=created_by, using=using)
        return workflow


class Step(Node):
    """One job to be: a ``@task`` function (or its dotted path) and its arguments."""

    def __init__(self, task, *args, **kwargs):
        if not isinstance(task, (Task, str)):
            raise TypeError(f"step() takes a @task function or a task's dotted path, not {type(task).__name__}.")
        self.task, self.args, self.kwargs = task, list(args), dict(kwargs)
        self.options, self.mutable = {}, True

    def _copy(self, **changes):
        copy = Step(self.task, *self.args, **self.kwargs)
        copy.options, copy.mutable = dict(self.options), self.mutable
        for key, value in changes.items():
            setattr(copy, key, value)
        return copy

    def using(self, **options):
        """Return a copy with job options set (``priority``, ``queue_name``, ``run_after``, ``max_attempts``, ...)."""
        chosen = {_RENAMED.get(key, key): value for key, value in options.items()}
        unknown = sorted(set(chosen) - _OPTIONS)
        if unknown:
            raise TypeError(f"step.using() got unknown options: {', '.join(unknown)}.")
        if isinstance(chosen.get("execute_at"), timedelta):
            chosen["delay"] = chosen.pop("execute_at").total_seconds()
        return self._copy(options={**self.options, **chosen})

    def immutable(self):
        """Return a copy that receives no result from the steps before it."""
        return self._copy(mutable=False)

    @property
    def task_name(self):
        return registry.name_of(self.task) if isinstance(self.task, Task) else self.task

    def job_spec(self, after=()):
        """Return the ``enqueue_many`` spec of this step placed after spec indexes ``after``."""
        spec = {"task": self.task, "args": list(self.args), "kwargs": dict(self.kwargs), **self.options}
        if after:
            spec["depends_on_index"] = list(after)
            spec["pass_results"] = self.mutable
        return spec

    def spec(self):
        """Return this step as a JSON job spec (a workflow's callback is stored so)."""
        spec = {"task": self.task_name, "args": list(self.args), "kwargs": dict(self.kwargs), **self.options}
        if isinstance(spec.get("execute_at"), datetime):
            spec["execute_at"] = spec["execute_at"].isoformat()
        return spec

    def place(self, specs, after):
        specs.append(self.job_spec(after))
        return [len(specs) - 1]

    def __repr__(self):
        return f"step({self.task_name!r}, *{self.args!r}, **{self.kwargs!r})"


def _node(value):
    if not isinstance(value, Node):
        raise TypeError(f"Expected a step, chain, group or chord, not {type(value).__name__}.")
    return value


class Chain(Node):
    """Nodes run one after another; each receives the results of the one before."""

    def __init__(self, *nodes):
        self.nodes = [_node(n) for n in nodes]

    def place(self, specs, after):
        for node in self.nodes:
            after = node.place(specs, after)
        return after


class Group(Node):
    """Nodes run side by side; the next node receives the list of their results, in order."""

    def __init__(self, *nodes):
        self.nodes = [_node(n) for n in nodes]

    def place(self, specs, after):
        tails = []
        for node in self.nodes:
            tails += node.place(specs, after)
        return tails


class Chord(Node):
    """A group, then a body that runs once every member succeeded and receives the list of their results."""

    def __init__(self, header, body):
        self.header = (
            header
            if isinstance(header, Group)
            else Group(*header)
            if isinstance(header, (list, tuple))
            else _node(header)
        )
        self.body = _node(body)

    def place(self, specs, after):
        return self.body.place(specs, self.header.place(specs, after))


def step(task, *args, **kwargs):
    """Return a step: ``task`` (a ``@task`` function or its dotted path) called with ``args`` and ``kwargs``."""
    return Step(task, *args, **kwargs)


def chain(*nodes):
    """Return a chain: each node runs after the previous one succeeded and receives its result first."""
    return Chain(*nodes)


def group(*nodes):
    """Return a group: nodes that run side by side."""
    return Group(*nodes)


def chord(header, body):
    """Return a chord: ``body`` runs once every member of ``header`` (a group) succeeded, with their results."""
    return Chord(header, body)
