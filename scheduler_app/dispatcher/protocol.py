"""What the dispatcher loop asks of its store: the contract, with no Django in it.

``store.DjangoStore`` implements it over the database; the tests' in-memory
fake implements it over dicts. One contract suite
(``tests/contract/test_store_contract.py``) runs against both, so the fake
cannot drift from the real thing.

Times are epoch seconds (floats) on this side of the contract; the store
turns them into what it stores. Every method runs on the loop thread.
"""

from collections.abc import Iterable, Sequence
from typing import Protocol

from ..vocabulary.jobs import ClaimedJob, Outcome
from .timeline import Entry


class Store(Protocol):
    # This dispatcher process's id: the primary key of its Worker row and
    # what claims write into a job's ``worker`` column.
    worker_id: str
    # Errors that mean "the database is unreachable right now": the loop
    # backs off, calls reset() and tries again.
    transient_errors: tuple[type[BaseException], ...]

    # -- this dispatcher's row ---------------------------------------------

    def register(self, *, queues: Iterable[str], slots: dict[str, int]) -> None:
        """Record this dispatcher as alive, serving ``queues`` with ``slots`` per group."""

    def heartbeat(self, now: float, *, running: int, processed: int, failed: int) -> None:
        """Record that this dispatcher is alive at ``now``, with its counters."""

    def unregister(self, *, processed: int, failed: int) -> None:
        """Record that this dispatcher stopped."""

    def reset(self) -> None:
        """Drop broken connections so the next call reconnects."""

    # -- reads -----------------------------------------------------------

    def load_window(self, queues: Iterable[str], until: float, limit: int) -> list[Entry]:
        """Return up to ``limit`` entries: due schedules' next runs first, then pending jobs by time."""

    def changes(self, queues: Iterable[str], since: float, limit: int | None = None) -> list[Entry] | None:
        """Return the pending jobs and schedules changed since ``since``.

        None when more than ``limit`` jobs changed: reload instead.
        A schedule with nothing to run comes as an entry whose ``at`` is None.
        """

    def data_changed(self) -> bool:
        """Return whether another process may have committed since the last call (always True where unknown)."""

    def cancel_requests(self) -> set[int]:
        """Return ids of this dispatcher's running jobs whose cancel was requested."""

    def paused_queues(self) -> set[str]:
        """Return the names of paused queues."""

    def limited_queues(self) -> set[str]:
        """Return the names of queues with a concurrency or a rate limit (claimed by ``claim_limited`` only)."""

    def any_due(self, queues: Iterable[str], now: float) -> bool:
        """Return whether a pending job of ``queues`` is due at ``now`` that a claim could take.

        Not an expired job, nor one another transaction holds locked (a
        claim skips it): a ``--burst`` run ends when there is none.
        """

    # -- transitions -----------------------------------------------------

    def claim(
        self,
        queues: Iterable[str],
        limit: int,
        now: float,
        ids: Sequence[int] | None = None,
        finished: Sequence[Outcome] = (),
        in_flight: Iterable[int] = (),
    ) -> list[ClaimedJob]:
        """Record ``finished`` outcomes, then claim up to ``limit`` due jobs (only ``ids`` if given).

        Never a job of ``in_flight`` (the ids this dispatcher still runs):
        a rescue may have made one pending while its attempt still runs
        here. An outcome the database refuses to store fails its own job
        (with the reason) and never stops the claim or the other outcomes.

        Claimed jobs come back in claim order: priority, time, id. A claim
        by query takes the first ``limit`` due jobs in that order. A claim
        by ``ids`` takes those of them still pending and due; the loop
        passes ``limit=len(ids)``, and which ids a smaller limit leaves out
        is not specified (PostgreSQL's claim by ids does not sort). Paused
        and limited queues are never claimed from here.
        """

    def claim_limited(
        self,
        queues: Iterable[str],
        limit: int,
        now: float,
        finished: Sequence[Outcome] = (),
        in_flight: Iterable[int] = (),
    ) -> tuple[list[ClaimedJob], dict[str, float | None]]:
        """Record ``finished``, then claim up to ``limit`` due jobs of ``queues`` by query, obeying limits.

        As ``claim``: never a job of ``in_flight``; a refused outcome fails its own job.

        Jobs come in claim order across ``queues``, but of each limited
        queue at most as many as its limits leave room for at this moment,
        across every dispatcher: ``concurrency_limit`` minus its running
        jobs (the attempts ``finished`` ends no longer count), and
        ``rate_limit`` minus the attempts started in the last
        ``rate_period`` seconds. Return the jobs and ``{queue: when}`` for
        the limited queues this claim left without room: when (epoch) its
        rate window next has room, or None when it waits for a running job
        to end.
        """

    def claim_keyed(
        self,
        queues: Iterable[str],
        limit: int,
        now: float,
        finished: Sequence[Outcome] = (),
        in_flight: Iterable[int] = (),
    ) -> tuple[list[ClaimedJob], bool]:
        """Record ``finished``, then claim up to ``limit`` due jobs of ``queues`` by query: those with a concurrency key first, within their keys' limits.

        As ``claim``: never a job of ``in_flight``; a refused outcome fails its own job.

        At most ``concurrency_limit`` jobs of one key run at once across
        every dispatcher (the attempts ``finished`` ends no longer count);
        the slots left go to jobs without a key. Paused and limited queues,
        expired jobs and ``in_flight`` are left alone. Return the jobs in
        claim order and whether a due job with a key was held back because
        its key was at its limit.
        """

    def notify_freed(self, queues: Iterable[str]) -> None:
        """Tell every dispatcher that running jobs of these limited queues ended (room to claim again)."""

    def finish(self, outcomes: Sequence[Outcome], now: float) -> set[int]:
        """Record outcomes; return the ids whose attempt was still current.

        Each job is left as ``types.attempt_end`` says: a job whose cancel
        was requested ends cancelled unless its attempt succeeded. An
        outcome the database refuses to store fails its own job instead.
        """

    def renew(self, now: float, ids: Iterable[int] | None = None) -> set[int]:
        """Extend this dispatcher's leases (only those of ``ids``, the attempts it still runs, if given).

        Return ids of its running jobs whose cancel was requested.
        """

    def rescue(self, now: float) -> int:
        """Take back any dispatcher's attempts whose lease expired; return how many (the leader's ``maintain``).

        A job with attempts left runs again after its task's backoff; one
        whose cancel was requested ends cancelled. Jobs that go back to
        pending are announced like any other change.
        """

    def expire(self, now: float) -> int:
        """End pending and waiting jobs past their ``expires_at`` cancelled (dependents settled); return how many."""

    def release(self, jobs: Sequence[ClaimedJob], now: float) -> set[int]:
        """Hand this dispatcher's unfinished attempts back (shutdown); return their ids.

        They stay unclaimable, each with an ``errors`` entry saying it was
        released, until this dispatcher is gone (``retire``, or its process
        ended): then ``take_back`` returns them to pending, the attempt not
        counted (cancelled, if their cancel was requested).
        """

    def take_back(self, now: float) -> tuple[int, int]:
        """Return jobs handed back by dispatchers now gone to pending; return ``(taken, still waiting)``."""

    def retire(self) -> None:
        """Say that nothing of this dispatcher runs any more (safe from any thread; idempotent)."""

    def materialize(self, now: float, ids: Iterable[int] = ()) -> list[Entry]:
        """Enqueue the jobs of due schedules; return their entries (``at`` None: nothing left to run)."""

    def write_rollups(self, tallies: dict, now: float, *, samples: bool = True) -> None:
        """Add ``tallies`` (``{(minute epoch, queue, task): rollup.Tally}``) to the history and the counters.

        With ``samples`` (once per rollup interval, with nothing gathered
        too) the store also samples queue depth and counts the jobs
        enqueued; without (every few seconds while attempts end) it only
        adds the tallies, so the metrics' counters are fresh.
        """

    def maintain(self, now: float, *, housekeeping_interval: float) -> float:
        """Take part in the maintenance; return when to be called again (epoch seconds).

        Exactly one live dispatcher leads: it rescues expired leases, ends
        expired jobs, marks silent dispatchers dead, catches up on due
        schedules and prunes (the slower services every
        ``housekeeping_interval``); the others look whether to lead. A
        leader that stops gives the role up (``unregister``).
        """
