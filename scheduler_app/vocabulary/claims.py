"""What a claim asks for (``ClaimRequest``) and what it gives back (``Claimed``): one for every caller.

The dispatcher loop (``dispatcher.claiming``, through its store), a burst
run (the same loop) and ``testing.drain`` make the same request of the same
claim (``lifecycle.claim``, then one entry per dialect: ``sql.Dialect.claim``).
A ``kind`` says which jobs the database may choose:

``plain``    due jobs without a concurrency key of queues without limits, by
             query in claim order, or only those of ``ids`` (the loop's
             window knows the best ones)
``limited``  by query, at most as many of each limited queue as its limits
             leave room for, across every dispatcher (``sql.limited``)
``keyed``    due jobs with a concurrency key first, within their keys'
             limits (``sql.keys``), then ``plain`` ones for the slots left

``limits=False`` (``drain``): paused and limited queues and keyed jobs are
claimed as plain ones, their limits not counted.
"""

from dataclasses import dataclass, field
from datetime import datetime

PLAIN = "plain"
LIMITED = "limited"
KEYED = "keyed"
KINDS = (PLAIN, LIMITED, KEYED)


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    worker: str  # the claiming dispatcher's id (its Worker row)
    queues: tuple[str, ...]
    limit: int  # at most this many jobs (free slots)
    lease: float  # seconds the claimed attempts are leased for
    now: datetime | None = None  # the claim's time (None: the clock's)
    kind: str = PLAIN
    ids: tuple[int, ...] | None = None  # plain: only these jobs
    due_by: datetime | None = None  # plain: due by then (default ``now``)
    limits: bool = True
    in_flight: tuple[int, ...] = ()  # jobs the claimer still runs: never claimed (invariant 14)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {self.kind!r}")


@dataclass(slots=True)
class Claimed:
    jobs: list  # ClaimedJobs, in claim order
    # limited: queue -> epoch its rate window next has room, or None (a running job must end first)
    blocked: dict = field(default_factory=dict)
    held: bool = False  # keyed: a due keyed job was left pending, its key at its limit
