"""The tests' shared plumbing, in one place: waiting, permissions, clients, dispatchers on threads and in subprocesses.

Fixtures built on these live in ``tests/conftest.py`` (one per concept:
``api``, ``job_row``, ``enqueue_job``, ``marker_dir`` ...).
"""

import io
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

from django.db import connection, connections

from scheduler_app.runtime import wiring
from tests.dispatcher.fakes import FakeClock

ROOT = Path(__file__).resolve().parents[1]


def wait_for(predicate, timeout=30.0, interval=None):
    """Poll until predicate() is true; return False on timeout (a hang guard, not a timing assertion).

    Without ``interval`` the polls start 5 ms apart and spread out to 100 ms:
    a condition that comes at once is seen at once, and a wait of seconds
    (a dispatcher process at work) does not spend a core on queries.
    """
    end = time.monotonic() + timeout
    pause = interval or 0.005
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(pause)
        if interval is None:
            pause = min(pause * 1.5, 0.1)
    return predicate()


def count_ticks(dispatcher):
    """Make ``dispatcher`` record the ``now`` of every tick it completes (see :func:`ticked`)."""
    done = []  # appended by the loop thread, read under cond
    cond = threading.Condition()
    original = dispatcher.tick

    def tick(now):
        try:
            return original(now)
        finally:
            with cond:
                done.append(now)
                cond.notify_all()

    dispatcher.tick = tick
    dispatcher.test_ticks = (done, cond)


def at_once(*functions, timeout=60.0):
    """Call ``functions`` at the same moment, each on a thread of its own; return their results in order.

    Each thread has its own database connections, closed when it is done (a
    test that uses this needs ``transaction=True``). The first exception of
    any of them is raised here; ``timeout`` is a hang guard.
    """
    start = threading.Barrier(len(functions))
    results = [None] * len(functions)
    errors = []

    def run(index, function):
        try:
            start.wait(timeout)
            results[index] = function()
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=pair, daemon=True) for pair in enumerate(functions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), "a thread did not return (hang guard)"
    if errors:
        raise errors[0]
    return results


def count_claims(store):
    """Record the kind of every claim ``store`` makes from now on; return the list they go to."""
    claims = []
    for name in ("claim", "claim_limited", "claim_keyed"):
        method = getattr(store, name)

        def counted(*args, _method=method, _name=name, **kwargs):
            claims.append(_name)
            return _method(*args, **kwargs)

        setattr(store, name, counted)
    return claims


def ticked(dispatcher, count=2, *, since=None, timeout=10.0):
    """Wake a running dispatcher until it completes ``count`` more ticks; return whether it did.

    Only ticks at loop time ``since`` (epoch seconds) or later count. Two by
    default: the first may have begun before the caller's last change, the
    second began after it. ``timeout`` is a hang guard.
    """
    done, cond = dispatcher.test_ticks
    end = time.monotonic() + timeout
    with cond:
        start = len(done)
        while sum(1 for t in done[start:] if since is None or t >= since) < count:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return False
            dispatcher.wake()
            cond.wait(min(remaining, 0.05))
    return True


@contextmanager
def dispatcher_thread(groups=None, **options):
    """Run a database-backed dispatcher on a thread for the block; stop it after."""
    groups = groups or {"*": ({"default", "slow", "other"}, 4)}
    options.setdefault("poll_interval", 0.2)
    options.setdefault("housekeeping_interval", 3600)
    dispatcher = wiring.create(groups, **options)
    count_ticks(dispatcher)
    errors = []

    def run():
        try:
            with wiring.wakeups(dispatcher) as listener:
                if listener is not None:
                    listener.connected.wait(10)
                started.set()
                dispatcher.run()
        except BaseException as exc:  # noqa: BLE001 - surfaced by the test below
            errors.append(exc)
            started.set()
        finally:
            connections.close_all()

    started = threading.Event()
    thread = threading.Thread(target=run, name="test-dispatcher", daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield dispatcher
    finally:
        dispatcher.stop()
        thread.join(30)
        assert not thread.is_alive(), "dispatcher thread did not stop"
        assert not errors, errors


def fake_clock():
    """Return a FakeClock at the current whole second: its times are exact as floats and as datetimes."""
    return FakeClock(float(int(time.time())))


@contextmanager
def ticking_dispatcher(clock, groups=None, **options):
    """Give the block a database-backed dispatcher to drive with ``tick()`` at ``clock``'s time.

    Its wake-ups are connected (in-process signal; NOTIFY on PostgreSQL), so
    what the test changes reaches its inbox as it would a running one; its
    worker threads run jobs for real. Timers the test does not drive are
    pushed out of the way (override them in ``options``).
    """
    groups = groups or {"*": ({"default", "slow", "other"}, 4)}
    for name in ("poll_interval", "full_sync_interval", "housekeeping_interval", "pause_interval"):
        options.setdefault(name, 3600)
    options.setdefault("change_check_interval", 0)
    options.setdefault("lease", 3600)  # and so the heartbeat, every lease / 3
    dispatcher = wiring.create(groups, clock=clock, **options)
    # What run() does around its ticks.
    dispatcher.store.register(
        queues=dispatcher.queues, slots={name: slots for name, (_, slots) in dispatcher.groups.items()}
    )
    try:
        with wiring.wakeups(dispatcher) as listener:
            if listener is not None:
                listener.connected.wait(10)
            tick = dispatcher.tick

            def tick_reading_notifications(now):
                dispatcher.poll_wakeups()  # what a running loop's wait reads (PostgreSQL's NOTIFY)
                return tick(now)

            dispatcher.tick = tick_reading_notifications
            yield dispatcher
    finally:
        dispatcher.pool.shutdown()
        dispatcher.store.unregister(processed=dispatcher.processed, failed=dispatcher.failed)


def run_until(dispatcher, clock, predicate=lambda: False, *, until, timeout=30.0):
    """Tick, moving ``clock`` to each moment the loop asks to wake at, up to ``until`` (epoch).

    Return True as soon as ``predicate()`` holds, False once the clock
    reached ``until`` without it. Between ticks at one moment, worker
    threads get a few real milliseconds. ``timeout`` is a hang guard.
    """
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        wait = dispatcher.tick(clock.time())
        if predicate():
            return True
        if clock.time() >= until:
            return False
        if wait > 0:
            clock.advance(min(wait, until - clock.time()))
        else:
            time.sleep(0.002)
    raise AssertionError("run_until: the loop did not reach the end time (hang guard)")


def settle(dispatcher, clock, predicate, timeout=10.0):
    """Tick at a fixed fake time until ``predicate()`` holds (worker threads run for real)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        dispatcher.tick(clock.time())
        if predicate():
            return True
        time.sleep(0.002)
    return False


def child_env(**extra):
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    env["SCHEDULER_TEST_DB_NAME"] = str(connection.settings_dict["NAME"])
    env["PYTHONUNBUFFERED"] = "1"
    env["SCHEDULER_LOG_LEVEL"] = extra.pop("log_level", "WARNING")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def manage(*args, **env):
    return [sys.executable, str(ROOT / "manage.py"), *args], child_env(**env)


def start_dispatcher(*args, log_path=None, **env):
    """Start `manage.py rundispatcher ARGS` against the test database; return the Popen."""
    cmd, environment = manage("rundispatcher", *args, **env)
    out = open(log_path, "w") if log_path else subprocess.DEVNULL  # noqa: SIM115 - the dispatcher writes to it
    return subprocess.Popen(cmd, env=environment, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def log_tail(path, size=3000):
    """Return the end of a dispatcher's log file (for an assertion's message); "" when it cannot be read."""
    try:
        return Path(path).read_text(errors="replace")[-size:]
    except OSError:
        return ""


def kill_and_wait(*processes):
    """SIGKILL what still runs of ``processes`` (a stopped one too) and reap them all."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.send_signal(signal.SIGKILL)
        process.wait(30)


def manage_in_process(*args):
    """Run ``manage.py ARGS`` in this process; return ``(exit code, stdout, stderr)``.

    The command line's own path (ManagementUtility: argument parsing, a
    CommandError printed as one line, the exit code) without starting an
    interpreter and Django (~0.7 s each). It closes the database
    connections at the end, as the command line does: transactional tests only.
    """
    from django.core.management import execute_from_command_line

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            execute_from_command_line(["manage.py", *args])
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def run_manage(*args, timeout=120, **env):
    cmd, environment = manage(*args, **env)
    return subprocess.run(cmd, env=environment, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def markers(directory):
    """Return {job_id: number of executions} from the `record` task's marker files."""
    counts = {}
    for name in os.listdir(directory):
        job_id = int(name.split("-", 1)[0])
        counts[job_id] = counts.get(job_id, 0) + 1
    return counts


# The test app's plain task (two numbers in, their sum out).
ADD = "tests.testapp.tasks.add"


def grant(user, *permissions):
    """Give ``user`` scheduler permissions: codenames ("view_job") or full names ("scheduler_app.view_job"); none: all."""
    from django.contrib.auth.models import Permission

    perms = Permission.objects.filter(content_type__app_label="scheduler_app")
    if permissions:
        codenames = [name.rpartition(".")[2] for name in permissions]
        perms = perms.filter(codename__in=codenames)
        assert perms.count() == len(set(codenames)), permissions
    user.user_permissions.add(*perms)
    return user


def token_client(user):
    """Return a DRF APIClient that sends ``user``'s API token."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def most_at_once(intervals):
    """Return how many of ``intervals`` ``[(start, end)]`` overlapped at most at once."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def most_in_a_window(times, width):
    """Return the most of ``times`` that fall in any window of ``width`` seconds."""
    times = sorted(times)
    return max((sum(1 for t in times[i:] if t < start + width) for i, start in enumerate(times)), default=0)


def overlapping_runs(marker_dir):
    """Return ``[(job id, run a, run b)]`` for runs of one job whose ``ticker`` lines interleave in time."""
    spans = {}
    for path in Path(marker_dir).glob("ticks-*"):
        for line in path.read_text().splitlines():
            job, run, at = line.split()
            first, last = spans.get((job, run), (float(at), float(at)))
            spans[(job, run)] = (min(first, float(at)), max(last, float(at)))
    found = []
    by_job = {}
    for (job, run), span in spans.items():
        by_job.setdefault(job, []).append((span, run))
    for job, runs in by_job.items():
        runs.sort()
        for (span_a, a), (span_b, b) in zip(runs, runs[1:], strict=False):
            if span_b[0] <= span_a[1]:
                found.append((int(job), a, b))
    return found


def _claim(kind, worker, *, queues, limit, lease, finished=(), connection=None, using="default", **request):
    from scheduler_app import lifecycle
    from scheduler_app.vocabulary.claims import ClaimRequest

    if request.get("ids") is not None:
        request["ids"] = tuple(request["ids"])
    request["in_flight"] = tuple(request.get("in_flight", ()))
    asked = ClaimRequest(worker, tuple(queues), limit, lease, kind=kind, **request)
    return lifecycle.claim(asked, finished=finished, connection=connection, using=using)


def claim(worker, **kw):
    """``lifecycle.claim`` of a plain request; return the claimed jobs (the tests' shorthand)."""
    return _claim("plain", worker, **kw).jobs


def claim_limited(worker, **kw):
    """``lifecycle.claim`` of a limited request; return ``(jobs, blocked)``."""
    claimed = _claim("limited", worker, **kw)
    return claimed.jobs, claimed.blocked


def claim_keyed(worker, **kw):
    """``lifecycle.claim`` of a keyed request; return ``(jobs, held)``."""
    claimed = _claim("keyed", worker, **kw)
    return claimed.jobs, claimed.held
