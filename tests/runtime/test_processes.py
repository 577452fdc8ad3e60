"""Process-mode queues, unit by unit: the QueueRouter, and the ProcessExecutor's bookkeeping of its workers.

Most tests hand the executor fake worker handles (``FakeWorker``: the
pipe, the cancel flag and the ending of a worker process, without the
process), so each case is exact and fast. A few run real worker processes
to hold the fake to the real protocol. None needs a database.
"""

import dataclasses
import itertools
import queue
import threading
import time

import pytest

from scheduler_app.dispatcher.pool import WorkerPool
from scheduler_app.runtime.processes import ProcessExecutor, QueueRouter, _Spawner
from scheduler_app.runtime.worker_process import ending
from scheduler_app.vocabulary.jobs import Outcome, Status
from scheduler_app.vocabulary.policy import TIMEOUT_CLASS, RetryPolicy
from tests.dispatcher.fake_executor import claimed_job
from tests.dispatcher.fakes import FakeClock
from tests.dispatcher.test_pool import wait_for

pytestmark = pytest.mark.once  # no database: the executor alone

T = "tests.testapp.tasks."
DIED = "scheduler_app.dispatcher.processes.WorkerProcessDied"
DID_NOT_START = "scheduler_app.dispatcher.processes.WorkerProcessDidNotStart"


def job(job_id=1, *, queue_name="default", timeout=None, attempt=1, max_attempts=3, task="fake", args=()):
    return dataclasses.replace(
        claimed_job(job_id, timeout=timeout, attempt=attempt, max_attempts=max_attempts),
        queue=queue_name,
        task=task,
        args=list(args),
    )


# -- QueueRouter -------------------------------------------------------------------------------


class Recorder:
    def __init__(self, name):
        self.name = name
        self.calls = []
        self.closed = 0

    def __call__(self, job, cancel_event, deadline):
        self.calls.append((job.id, cancel_event, deadline))
        return Outcome(job.id, job.worker, job.attempt, Status.SUCCEEDED, result_json=f'"{self.name}"')

    def close(self):
        self.closed += 1


def router(*process_queues):
    threads, processes = Recorder("thread"), Recorder("process")
    return QueueRouter(threads, processes, process_queues), threads, processes


def test_the_router_sends_process_queues_to_the_processes_and_the_rest_to_the_thread():
    route, threads, processes = router("reports", "video")
    event = threading.Event()
    assert route(job(1, queue_name="reports"), event, None).result_json == '"process"'
    assert route(job(2, queue_name="video"), event, 5.0).result_json == '"process"'
    assert route(job(3, queue_name="default"), event, 7.0).result_json == '"thread"'
    assert route(job(4, queue_name="Reports"), event, None).result_json == '"thread"'  # names are exact
    assert processes.calls == [(1, event, None), (2, event, 5.0)]  # passed on as given
    assert threads.calls == [(3, event, 7.0), (4, event, None)]


def test_the_router_owns_the_deadlines_of_process_queues_only():
    route, _, _ = router("reports")
    assert route.owns_deadline(job(queue_name="reports")) is True
    assert route.owns_deadline(job(queue_name="default")) is False
    assert QueueRouter(Recorder("t"), Recorder("p"), []).owns_deadline(job(queue_name="reports")) is False


def test_the_router_keeps_its_own_copy_of_the_queues():
    queues = ["reports"]
    route = QueueRouter(Recorder("t"), Recorder("p"), (q for q in queues))
    queues.append("default")
    assert route.process_queues == frozenset({"reports"})


def test_closing_the_router_closes_the_process_executor():
    route, threads, processes = router("reports")
    route.close()
    assert (processes.closed, threads.closed) == (1, 0)


def test_the_pool_leaves_a_process_attempts_deadline_to_the_executor():
    route, threads, processes = router("reports")
    hold = threading.Event()

    def blocking(recorder):
        def execute(job, cancel_event, deadline):
            outcome = recorder(job, cancel_event, deadline)
            hold.wait(10)
            return outcome

        return execute

    route.thread_execute, route.process_execute = blocking(threads), blocking(processes)
    clock = FakeClock(1000.0)
    pool = WorkerPool({"*": 2}, route, wake=lambda: None, clock=clock)
    try:
        pool.submit_many("*", [job(1, queue_name="reports", timeout=5.0), job(2, timeout=5.0)])
        assert wait_for(lambda: threads.calls and processes.calls)
        assert processes.calls[0][2] is None  # no deadline passed on: the executor counts from the task's start
        assert threads.calls[0][2] == 1005.0
        assert pool.next_deadline() == 1005.0
        clock.advance(60)
        assert [j.id for j in pool.expire()] == [2]  # the process attempt is not the pool's to expire
    finally:
        hold.set()
        pool.shutdown()


# -- ending ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, said",
    [
        (None, "ended"),
        (0, "ended with exit code 0"),
        (3, "ended with exit code 3"),
        (-9, "was killed by SIGKILL"),
        (-15, "was killed by SIGTERM"),
        (-200, "was killed by signal 200"),
    ],
)
def test_ending_says_how_a_process_ended(code, said):
    assert ending(code) == said


# -- ProcessExecutor with fake workers ------------------------------------------------------------


def answered(worker, job, status=Status.SUCCEEDED):
    """Send the attempt's outcome back; its result is the worker's pid (which worker ran it)."""
    outcome = Outcome(job.id, job.worker, job.attempt, status, result_json=str(worker.pid))
    worker.messages.put(("outcome", outcome))


def succeed(worker, job):
    """Answer an attempt as a worker that runs it at once."""
    worker.messages.put(("started", None))
    answered(worker, job)


def die(code):
    def answer(worker, job):
        worker.messages.put(("started", None))
        worker.code = code

    return answer


def start_and_hang(deadline_in=None):
    """Start the task (its deadline ``deadline_in`` seconds on) and never return."""

    def answer(worker, job):
        worker.messages.put(("started", None if deadline_in is None else time.time() + deadline_in))

    return answer


def after(event=None, status=Status.SUCCEEDED):
    """Start, and return once ``event`` is set (None: the worker's cancel flag, as a cooperative task)."""

    def answer(worker, job):
        worker.messages.put(("started", None))

        def finish():
            if (event or worker.cancel).wait(10) and worker.code is None:
                answered(worker, job, status)

        threading.Thread(target=finish, daemon=True).start()

    return answer


class FakeWorker:
    """A worker process's handle without the process: the pipe, the cancel flag, the ending."""

    pids = itertools.count(70_000)

    def __init__(self, answer=succeed, *, sets_up=True, pipe_outlives=False):
        self.pid = next(self.pids)
        # A forked grandchild holds the pipe open: the process ends, its pipe does not.
        self.pipe_outlives = pipe_outlives
        self.cancel = threading.Event()
        self.ready = False  # the executor's: it has said "ready"
        self.job = None
        self.aborted = False
        self.conn = self
        self.answer = answer
        self.messages = queue.Queue()  # to the dispatcher
        self.sent = []  # attempts received, with the cancel flag as it was then
        self.code = None  # exit code once it ended
        self.asked_to_exit = False
        self.ended = 0
        self.polls = 0
        if sets_up:
            self.messages.put(("ready", None))

    # The pipe (the dispatcher's end).
    def poll(self, timeout):
        self.polls += 1  # one a turn of the executor's loop
        end = time.monotonic() + timeout
        while not self._readable() and time.monotonic() < end:
            time.sleep(0.001)
        return self._readable()

    def _readable(self):
        return not self.messages.empty() or (self.code is not None and not self.pipe_outlives)

    def recv(self):
        try:
            return self.messages.get_nowait()
        except queue.Empty:
            raise EOFError from None  # the process ended: its pipe is closed

    def send(self, job):
        if self.code is not None:
            raise OSError("the pipe is closed")
        self.sent.append((job, self.cancel.is_set()))
        self.answer(self, job)

    # Its ending.
    def exited(self):
        return self.code is not None

    def end(self, wait=0.0):
        self.ended += 1
        if self.code is None:
            self.code = 0 if self.asked_to_exit else -9
        return self.code

    def kill(self):
        return self.end()

    def ask_to_exit(self):
        self.asked_to_exit = True

    def stop(self):
        self.ask_to_exit()
        return self.end(wait=2.0)


class Workers:
    """Makes the executor's workers: each the next of ``plans`` (then ``succeed``), or raises ``failing``."""

    def __init__(self, *plans, failing=None, **options):
        self.plans = list(plans)
        self.failing = failing
        self.options = options
        self.meanwhile = None  # called while a worker starts
        self.made = []

    def __call__(self):
        if self.failing is not None:
            raise self.failing
        if self.meanwhile is not None:
            self.meanwhile()
        worker = FakeWorker(self.plans.pop(0) if self.plans else succeed, **self.options)
        self.made.append(worker)
        return worker


@pytest.fixture
def executor():
    """Return ``make(*plans, failing=, start_timeout=, **worker options)``: a ProcessExecutor over fake workers."""
    made = []

    def make(*plans, failing=None, start_timeout=60.0, **worker_options):
        ex = ProcessExecutor(RetryPolicy(base=2.0, jitter=0.0), "unused.settings", start_timeout=start_timeout)
        ex.workers = Workers(*plans, failing=failing, **worker_options)
        ex._spawner = _Spawner(ex.workers)
        made.append(ex)
        return ex

    yield make
    for ex in made:
        ex.close()


def run_in_thread(ex, attempt, cancel=None):
    """Run ``attempt`` on a slot thread of its own; return ``(thread, outcomes)``."""
    outcomes = []
    thread = threading.Thread(target=lambda: outcomes.append(ex(attempt, cancel or threading.Event())), daemon=True)
    thread.start()
    return thread, outcomes


def test_the_executor_owns_every_deadline(executor):
    assert executor().owns_deadline(job()) is True


def test_an_idle_worker_runs_the_next_attempt(executor):
    ex = executor()
    first = ex(job(1), threading.Event())
    second = ex(job(2), threading.Event())
    (worker,) = ex.workers.made
    assert first.result_json == second.result_json == str(worker.pid)
    assert [j.id for j, _ in worker.sent] == [1, 2]
    assert ex._idle == [worker] and ex._busy == set() and worker.job is None


def test_a_busy_worker_is_lent_to_one_attempt_at_a_time(executor):
    release = threading.Event()
    ex = executor(after(release))
    thread, outcomes = run_in_thread(ex, job(1))
    try:
        assert wait_for(lambda: ex.workers.made and ex.workers.made[0].sent)
        (busy,) = ex.workers.made
        assert ex._busy == {busy} and busy.job.id == 1 and ex._idle == []
        other = ex(job(2), threading.Event())  # a second slot meanwhile: a second worker
        assert other.result_json == str(ex.workers.made[1].pid)
    finally:
        release.set()
    thread.join(5)
    assert outcomes[0].result_json == str(busy.pid)
    assert set(ex._idle) == set(ex.workers.made) and ex._busy == set()


def test_a_worker_that_died_while_idle_is_ended_and_the_attempt_runs_on_another(executor):
    ex = executor()
    ex(job(1), threading.Event())
    (dead,) = ex.workers.made
    dead.code = -9  # the OOM killer, between two attempts
    outcome = ex(job(2), threading.Event())
    fresh = ex.workers.made[1]
    assert outcome.status == Status.SUCCEEDED and outcome.result_json == str(fresh.pid)  # not this attempt's doing
    assert dead.ended == 1 and [j.id for j, _ in dead.sent] == [1]
    assert ex._idle == [fresh]


@pytest.mark.parametrize("code, how", [(3, "ended with exit code 3"), (-9, "was killed by SIGKILL")])
def test_a_worker_that_dies_mid_attempt_fails_it_and_is_replaced(executor, code, how):
    ex = executor(die(code))
    outcome = ex(job(1, attempt=1, max_attempts=2), threading.Event())
    assert (outcome.status, outcome.error["exception_class"]) == (Status.PENDING, DIED)  # retried
    assert outcome.error["message"] == f"The worker process running this attempt {how} before it returned."
    assert outcome.error["traceback"] == ""
    dead, replacement = ex.workers.made
    assert dead.ended >= 1 and ex._idle == [replacement] and ex._busy == set()
    last = ex(job(2, attempt=2, max_attempts=2), threading.Event())
    assert last.result_json == str(replacement.pid)


def test_a_death_on_the_last_attempt_fails_the_job(executor):
    ex = executor(die(1))
    outcome = ex(job(1, attempt=3, max_attempts=3), threading.Event())
    assert (outcome.status, outcome.retry_at, outcome.error["exception_class"]) == (Status.FAILED, None, DIED)


def test_a_worker_that_cannot_be_started_fails_the_attempt_for_a_retry(executor):
    ex = executor(failing=OSError("Resource temporarily unavailable"))
    outcome = ex(job(1, attempt=1, max_attempts=3), threading.Event())
    assert (outcome.status, outcome.error["exception_class"]) == (Status.PENDING, DID_NOT_START)
    assert outcome.error["message"] == "Could not start a worker process: OSError: Resource temporarily unavailable"
    assert ex._idle == [] and ex._busy == set()


def test_a_worker_not_set_up_in_time_is_killed_and_replaced(executor):
    ex = executor(sets_up=False, start_timeout=0.05)
    outcome = ex(job(1), threading.Event())
    assert (outcome.status, outcome.error["exception_class"]) == (Status.PENDING, DID_NOT_START)
    assert outcome.error["message"] == "The worker process did not start within 0.05s; it was killed."
    stuck, replacement = ex.workers.made
    assert stuck.code == -9 and stuck.sent == []  # the attempt never reached it
    assert ex._idle == [replacement]


def test_a_timeout_kills_the_worker_and_fails_the_attempt(executor):
    ex = executor(start_and_hang(deadline_in=0.05))
    outcome = ex(job(1, timeout=0.05, attempt=1, max_attempts=2), threading.Event())
    assert (outcome.status, outcome.error["exception_class"]) == (Status.PENDING, TIMEOUT_CLASS)
    hung, replacement = ex.workers.made
    assert hung.code == -9 and ex._idle == [replacement]  # a hard timeout: the late result cannot come


class LaterMonotonic:
    """The time module, with a monotonic clock ``ahead`` seconds later than the real one."""

    def __init__(self):
        self.ahead = 0.0

    def monotonic(self):
        return time.monotonic() + self.ahead

    def __getattr__(self, name):
        return getattr(time, name)


def test_without_a_deadline_an_attempt_runs_as_long_as_it_takes(executor, monkeypatch):
    from scheduler_app.runtime import processes

    clock = LaterMonotonic()
    monkeypatch.setattr(processes, "time", clock)
    release = threading.Event()
    ex = executor(after(release), start_timeout=0.3)
    thread, outcomes = run_in_thread(ex, job(1))
    assert wait_for(lambda: ex.workers.made and ex.workers.made[0].sent and ex.workers.made[0].messages.empty())
    worker = ex.workers.made[0]  # the task started: its "started" is read
    clock.ahead = 3600.0  # an hour past start_timeout: once the task started, only its own deadline counts
    polls = worker.polls
    assert wait_for(lambda: worker.polls >= polls + 2)  # a whole turn of the loop at that time
    assert worker.code is None
    release.set()
    thread.join(5)
    assert outcomes[0].status == Status.SUCCEEDED and worker.code is None


def test_a_cancel_requested_before_the_start_reaches_the_worker_with_the_attempt(executor):
    ex = executor()
    cancel = threading.Event()
    cancel.set()
    ex(job(1), cancel)  # a new worker: the attempt goes once it is set up
    ex(job(2), threading.Event())
    ex(job(3), cancel)  # a worker set up already: the attempt goes at once
    ex(job(4), threading.Event())
    (worker,) = ex.workers.made
    # Set before the attempt is sent (the task never starts), cleared for the next one.
    assert [flag for _, flag in worker.sent] == [True, False, True, False]


def test_a_cancel_requested_during_the_attempt_reaches_the_worker(executor):
    ex = executor(after(None, Status.CANCELLED))
    cancel = threading.Event()
    thread, outcomes = run_in_thread(ex, job(1), cancel)
    assert wait_for(lambda: ex.workers.made and ex.workers.made[0].sent)
    cancel.set()
    thread.join(5)
    assert outcomes[0].status == Status.CANCELLED
    assert ex._idle == ex.workers.made  # a cancelled attempt leaves a healthy worker


def test_stop_attempts_kills_only_the_workers_running_those_attempts(executor):
    release = threading.Event()
    ex = executor(start_and_hang(), after(release))
    lost, kept = job(1, attempt=1, max_attempts=3), job(2)
    t1, lost_outcomes = run_in_thread(ex, lost)
    assert wait_for(lambda: len(ex.workers.made) == 1 and ex.workers.made[0].sent)
    t2, kept_outcomes = run_in_thread(ex, kept)
    assert wait_for(lambda: len(ex.workers.made) == 2 and ex.workers.made[1].sent)
    try:
        assert ex.stop_attempts([job(3)]) == 0
        assert ex.stop_attempts([lost]) == 1
        t1.join(5)
        first, second = ex.workers.made[:2]
        assert first.aborted and first.code == -9 and not second.aborted and second.code is None
        (outcome,) = lost_outcomes
        assert outcome.error["exception_class"] == DIED
        assert outcome.error["message"] == "Stopped: the dispatcher released this attempt."
        assert ex.workers.made[2] in ex._idle  # the slot goes on with a fresh worker
    finally:
        release.set()
    t2.join(5)
    assert kept_outcomes[0].result_json == str(second.pid)


def test_stop_attempts_finds_a_reused_worker_by_its_attempt(executor):
    ex = executor()
    ex(job(1), threading.Event())
    (worker,) = ex.workers.made
    worker.answer = start_and_hang()
    thread, outcomes = run_in_thread(ex, job(2))
    assert wait_for(lambda: len(worker.sent) == 2)
    assert ex.stop_attempts([job(2)]) == 1
    thread.join(5)
    assert worker.aborted and outcomes[0].error["message"] == "Stopped: the dispatcher released this attempt."


def test_an_attempt_stopped_as_its_deadline_came_is_released_not_timed_out(executor):
    def marked_then_hang(worker, job):
        # stop_attempts marks the worker, then kills it: the deadline comes in between.
        worker.aborted = True
        start_and_hang(deadline_in=0.05)(worker, job)

    ex = executor(marked_then_hang)
    outcome = ex(job(1, timeout=0.05), threading.Event())
    assert outcome.error["message"] == "Stopped: the dispatcher released this attempt."


def test_a_worker_that_ended_is_noticed_while_its_pipe_stays_open(executor):
    ex = executor(die(5), pipe_outlives=True)
    thread, outcomes = run_in_thread(ex, job(1))
    thread.join(5)
    assert not thread.is_alive()
    assert outcomes[0].error["exception_class"] == DIED and "ended with exit code 5" in outcomes[0].error["message"]


def test_a_worker_started_as_the_executor_closes_is_killed_not_kept(executor):
    ex = executor()
    ex.workers.meanwhile = lambda: ex.abort([])
    ex.prewarm(1)
    outcome = ex(job(1), threading.Event())
    assert ex._idle == [] and ex._busy == set()
    assert outcome.error["message"] == "Stopped: the dispatcher released this attempt."
    (first,) = ex.workers.made  # the attempt found the executor closed before it started a worker
    assert first.code == -9 and first.sent == []
    ex2 = executor()
    ex2.workers.meanwhile = lambda: ex2.abort([])
    outcome = ex2(job(2), threading.Event())  # closed while its worker started
    (second,) = ex2.workers.made
    assert second.code == -9 and second.sent == [] and ex2._busy == set()
    assert outcome.error["message"] == "Stopped: the dispatcher released this attempt."


def test_after_abort_no_attempt_starts(executor):
    ex = executor()
    ex(job(1), threading.Event())
    ex.abort([])
    outcome = ex(job(2), threading.Event())
    assert outcome.error["exception_class"] == DIED and "released" in outcome.error["message"]
    (worker,) = ex.workers.made
    assert [j.id for j, _ in worker.sent] == [1]


def test_abort_kills_the_running_attempts_and_starts_no_replacement(executor):
    ex = executor(start_and_hang())
    running = job(1)
    thread, outcomes = run_in_thread(ex, running)
    assert wait_for(lambda: ex.workers.made and ex.workers.made[0].sent)
    ex.abort([running])
    thread.join(5)
    (worker,) = ex.workers.made
    assert worker.aborted and worker.code == -9
    assert outcomes[0].error["message"] == "Stopped: the dispatcher released this attempt."
    assert ex._idle == [] and ex._busy == set()


def test_a_worker_whose_attempt_ends_after_the_abort_is_stopped_not_kept(executor):
    release = threading.Event()
    ex = executor(after(release))
    thread, outcomes = run_in_thread(ex, job(1))
    assert wait_for(lambda: ex.workers.made and ex.workers.made[0].sent)
    ex.abort([])  # other attempts' workers: this one runs on
    release.set()
    thread.join(5)
    (worker,) = ex.workers.made
    assert outcomes[0].status == Status.SUCCEEDED
    assert worker.asked_to_exit and worker.code == 0 and ex._idle == []


def test_close_ends_idle_workers_and_kills_busy_ones(executor):
    ex = executor(start_and_hang(), succeed)
    thread, outcomes = run_in_thread(ex, job(1))
    assert wait_for(lambda: ex.workers.made and ex.workers.made[0].sent)
    ex(job(2), threading.Event())  # on a second worker, idle after it
    busy, idle = ex.workers.made
    assert ex._idle == [idle] and ex._busy == {busy}
    ex.close()
    thread.join(5)
    assert idle.asked_to_exit and idle.code == 0 and not idle.aborted
    assert busy.aborted and busy.code == -9
    assert outcomes[0].error["message"] == "Stopped: the dispatcher released this attempt."
    assert ex._idle == [] and len(ex.workers.made) == 2  # no replacement
    later = ex(job(3), threading.Event())
    assert later.error["exception_class"] == DIED and len(ex.workers.made) == 2
    with pytest.raises(RuntimeError, match="closed"):
        ex._spawner.start()


def test_prewarm_starts_idle_workers_and_survives_a_failure(executor, caplog):
    ex = executor()
    ex.prewarm(3)
    assert len(ex._idle) == 3 and ex._idle == ex.workers.made
    failing = executor(failing=OSError("no"))
    failing.prewarm(2)  # logged, not raised: a job that needs one starts one
    assert failing._idle == []
    assert "could not start the worker processes ahead of their jobs: OSError: no" in caplog.text


def test_an_attempt_takes_a_prewarmed_worker(executor):
    ex = executor()
    ex.prewarm(1)
    (worker,) = ex.workers.made
    outcome = ex(job(1), threading.Event())
    assert outcome.result_json == str(worker.pid) and len(ex.workers.made) == 1


# -- real worker processes -----------------------------------------------------------------


def test_a_real_worker_runs_attempts_one_after_another_and_a_dead_one_is_replaced():
    ex = ProcessExecutor(RetryPolicy(base=2.0, jitter=0.0), "tests.settings")
    try:
        assert ex(job(1, task=T + "add", args=(2, 3)), threading.Event()).result_json == "5"
        (worker,) = ex._idle
        cancel = threading.Event()
        thread, outcomes = run_in_thread(ex, job(2, task=T + "cooperative", args=(30,)), cancel)
        assert wait_for(lambda: ex._busy)
        cancel.set()  # crosses to the process through its shared event
        thread.join(10)
        assert outcomes[0].status == Status.CANCELLED and ex._idle == [worker]  # the same process, reused
        died = ex(job(3, task=T + "exits", args=(7, "os._exit"), attempt=1, max_attempts=2), threading.Event())
        assert died.status == Status.PENDING and died.error["exception_class"] == DIED
        assert "ended with exit code 7" in died.error["message"]
        (replacement,) = ex._idle
        assert replacement is not worker and worker.exited() and replacement.pid != worker.pid
    finally:
        ex.close()
    assert wait_for(lambda: replacement.exited(), timeout=10)
