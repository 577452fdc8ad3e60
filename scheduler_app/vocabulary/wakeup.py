"""The wake-up message: what changed, told to every dispatcher.

One type, one wire format. The lifecycle service builds a WakeUp for each
change and sends it twice: as the payload of a PostgreSQL ``NOTIFY`` (to
every dispatcher on every host, on commit) and as the ``jobs_changed``
signal in its own process. Dispatchers decode NOTIFY payloads back into a
WakeUp; the loop applies it to its timeline and pool.

Wire format (JSON object, every key optional)::

    {"queues": ["default"],                # queues the change touches
     "jobs": [[id, execute_at epoch, priority, queue], ...],   # now pending
                                           # (a fifth item, 1, marks a job with a concurrency key)
     "removed": [id, ...],                 # no longer pending
     "cancel": [id, ...],                  # running jobs asked to stop
     "schedules": [[id, next run epoch or null], ...],
     "freed": ["default"],                 # limited queues where a running job ended
     "sync": true,                         # too much to list: poll instead
     "queues_changed": true,               # a queue was paused, resumed or its limits changed
     "handed_back": true}                  # a stopping dispatcher handed attempts back: take them
                                           # back once it is gone (``lifecycle.take_back``)

NOTIFY payloads must stay under 8000 bytes: past ``MAX_ITEMS`` jobs or
schedules a message says ``sync`` instead of listing them.

Pure: no Django.
"""

import functools
import json
from dataclasses import dataclass

MAX_ITEMS = 50

# An id no real job has: ``template`` splits the encoded text around it.
_ID_MARK = -918_273_645_546_372_819


@dataclass(frozen=True, slots=True)
class WakeUp:
    queues: tuple = ()
    jobs: tuple = ()  # (id, execute_at epoch, priority, queue[, 1 if it has a concurrency key])
    removed: tuple = ()
    cancel: tuple = ()
    schedules: tuple = ()  # (schedule id, next run epoch or None)
    freed: tuple = ()  # limited queues where a running job ended: room to claim again
    sync: bool = False
    queues_changed: bool = False
    handed_back: bool = False

    @classmethod
    def of(
        cls,
        *,
        jobs=(),
        removed=(),
        cancel=(),
        schedules=(),
        queues=(),
        freed=(),
        queues_changed=False,
        handed_back=False,
    ):
        """Build a message; ``jobs`` are (id, execute_at epoch, priority, queue) tuples.

        Past MAX_ITEMS jobs, removals or schedules, the message asks for a
        sync instead of listing them.
        """
        jobs = tuple(tuple(j) for j in jobs)
        schedules = tuple((int(i), at) for i, at in schedules)
        queues = tuple(sorted(set(queues) | {j[3] for j in jobs}))
        freed = tuple(sorted(set(freed)))
        if max(len(jobs), len(removed), len(cancel), len(schedules)) > MAX_ITEMS:
            return cls(queues=queues, freed=freed, sync=True, queues_changed=queues_changed, handed_back=handed_back)
        return cls(
            queues=queues,
            jobs=jobs,
            removed=tuple(removed),
            cancel=tuple(cancel),
            schedules=schedules,
            freed=freed,
            queues_changed=queues_changed,
            handed_back=handed_back,
        )

    def to_dict(self):
        data = {"queues": list(self.queues)}
        for name in ("jobs", "removed", "cancel", "schedules", "freed"):
            value = getattr(self, name)
            if value:
                data[name] = [list(v) if isinstance(v, tuple) else v for v in value]
        if self.sync:
            data["sync"] = True
        if self.queues_changed:
            data["queues_changed"] = True
        if self.handed_back:
            data["handed_back"] = True
        return data

    def encode(self):
        """Return the message as NOTIFY payload text."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def decode(cls, text):
        """Return the message in ``text``; anything unreadable asks for a sync.

        A payload is only a hint (the database is the truth), so a message
        from an older or newer version, or garbage, costs one poll, never an
        exception in the listener.
        """
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("not an object")
            return cls(
                queues=tuple(str(q) for q in data.get("queues", ())),
                jobs=tuple(_job(item) for item in data.get("jobs", ())),
                removed=tuple(int(i) for i in data.get("removed", ())),
                cancel=tuple(int(i) for i in data.get("cancel", ())),
                schedules=tuple((int(i), None if at is None else float(at)) for i, at in data.get("schedules", ())),
                freed=tuple(str(q) for q in data.get("freed", ())),
                sync=bool(data.get("sync", False)),
                queues_changed=bool(data.get("queues_changed", False)),
                handed_back=bool(data.get("handed_back", False)),
            )
        except (TypeError, ValueError):
            return cls(sync=True, queues_changed=True)

    @classmethod
    def template(cls, execute_at, priority, queue):
        """Return ``(prefix, suffix)``: the encoded message of one new job, split where its id goes.

        An INSERT that does not know the job's id yet sends
        ``prefix || id || suffix`` (see ``sql.pg_insert_and_notify``). The
        text around the time is made once per priority and queue; the time
        is written as ``encode`` writes a float.
        """
        prefix, middle, end = _template_parts(priority, queue)
        return prefix, f"{middle}{float(execute_at)!r}{end}"


def _job(item):
    """Return a decoded job item: ``(id, at, priority, queue)``, with ``1`` after it for a keyed job."""
    i, at, p, q, *keyed = item
    if len(keyed) > 1:
        raise ValueError("a job item has four or five values")
    return (int(i), float(at), int(p), str(q)) + ((1,) if keyed and keyed[0] else ())


@functools.lru_cache(maxsize=256)
def _template_parts(priority, queue):
    text = WakeUp.of(jobs=[(_ID_MARK, _AT_MARK, priority, queue)]).encode()
    prefix, rest = text.split(str(_ID_MARK))
    middle, end = rest.split(repr(_AT_MARK))
    return prefix, middle, end


_AT_MARK = -918_273_645.546_372_8  # a time no job has: split out of the text like the id
