"""RetryPolicy: how an attempt's ending becomes an Outcome (backoff, retry_on, result size, error entries).

Every time in an outcome comes from the ``now`` the caller passes: the
tests pass a fixed moment far from today, in a zone that is not UTC, so a
clock read anywhere would show.
"""

import random
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from scheduler_app.vocabulary import storable
from scheduler_app.vocabulary.jobs import Outcome, Status
from scheduler_app.vocabulary.policy import (
    RESULT_TOO_LARGE_CLASS,
    SNOOZED_TOO_OFTEN_CLASS,
    TIMEOUT_CLASS,
    UNSTORABLE_CLASS,
    RetryPolicy,
    class_path,
    error_entry,
)
from tests.dispatcher.fake_executor import claimed_job

# Not today, not UTC: a time read from a clock cannot pass for it.
NOW = datetime(2001, 2, 3, 4, 5, 6, 789000, tzinfo=timezone(timedelta(hours=5, minutes=30)))


def job(attempt=1, max_attempts=3, *, task="fake", timeout=None, snoozes=0, worker="w-1"):
    return replace(
        claimed_job(9, attempt=attempt, max_attempts=max_attempts, timeout=timeout, worker=worker),
        task=task,
        snoozes=snoozes,
    )


def plain(**kw):
    """A policy without jitter."""
    return RetryPolicy(jitter=0.0, **kw)


def raised_here(exc):
    """Return ``exc`` raised and caught (it has a traceback)."""
    try:
        raise exc
    except Exception as caught:  # noqa: BLE001 - returns whatever it raised
        return caught


class Outer:
    class Inner(Exception):
        pass


# -- backoff -----------------------------------------------------------------


def test_backoff_doubles_per_attempt_from_the_base():
    policy = plain(base=3.0, cap=1e9)
    assert [policy.backoff(n) for n in range(1, 7)] == [3.0, 6.0, 12.0, 24.0, 48.0, 96.0]


def test_backoff_is_capped():
    policy = plain(base=2.0, cap=10.0)
    assert [policy.backoff(n) for n in (1, 2, 3, 4, 5, 100)] == [2.0, 4.0, 8.0, 10.0, 10.0, 10.0]


def test_a_base_of_zero_retries_at_once():
    assert [plain(base=0.0).backoff(n) for n in (1, 5, 100)] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("seed", range(5))
def test_jitter_stays_within_its_fraction_either_way(seed):
    policy = RetryPolicy(base=10.0, cap=40.0, jitter=0.25, rng=random.Random(seed))
    for attempt, delay in ((1, 10.0), (2, 20.0), (3, 40.0), (9, 40.0)):  # the cap, then jitter
        values = [policy.backoff(attempt) for _ in range(300)]
        assert all(delay * 0.75 <= v <= delay * 1.25 for v in values), (attempt, min(values), max(values))
        # Both ways, and not a constant: the jitter is applied.
        assert min(values) < delay * 0.9 and max(values) > delay * 1.1


def test_jitter_draws_from_the_policys_rng():
    a = RetryPolicy(base=10.0, jitter=0.5, rng=random.Random(42))
    b = RetryPolicy(base=10.0, jitter=0.5, rng=random.Random(42))
    assert [a.backoff(n) for n in range(1, 8)] == [b.backoff(n) for n in range(1, 8)]
    expected = random.Random(7)
    c = RetryPolicy(base=10.0, cap=100.0, jitter=0.5, rng=random.Random(7))
    assert c.backoff(3) == 40.0 * (1 + expected.uniform(-0.5, 0.5))


def test_jitter_never_makes_a_backoff_negative():
    policy = RetryPolicy(base=10.0, jitter=3.0, rng=random.Random(1))
    values = [policy.backoff(1) for _ in range(500)]
    assert min(values) == 0.0 and max(values) > 10.0


def test_the_rng_and_task_options_do_not_take_part_in_equality():
    assert RetryPolicy(base=1.0, rng=random.Random(1), task_options=lambda t: None) == RetryPolicy(base=1.0)
    assert RetryPolicy(base=1.0) != RetryPolicy(base=2.0)


# -- a task's own options -----------------------------------------------------


def options_of(table):
    """Return a ``task_options`` over ``{task: options}`` (others: None), counting its calls."""

    def task_options(task):
        task_options.calls.append(task)
        return table.get(task)

    task_options.calls = []
    return task_options


def test_a_tasks_own_backoff_replaces_the_base_and_is_capped():
    policy = plain(base=2.0, cap=100.0, task_options=options_of({"own": SimpleNamespace(backoff=7.0, retry_on=None)}))
    assert policy.retry_at("own", 1, NOW) == NOW + timedelta(seconds=7)
    assert policy.retry_at("own", 3, NOW) == NOW + timedelta(seconds=28)
    assert policy.retry_at("own", 10, NOW) == NOW + timedelta(seconds=100)
    assert policy.retry_at("other", 3, NOW) == NOW + timedelta(seconds=8)


def test_a_tasks_backoff_of_zero_is_honoured_not_taken_for_unset():
    policy = plain(base=5.0, task_options=options_of({"now": SimpleNamespace(backoff=0, retry_on=None)}))
    assert policy.retry_at("now", 4, NOW) == NOW


@pytest.mark.parametrize("options", [None, SimpleNamespace(), SimpleNamespace(backoff=None, retry_on=None)])
def test_without_a_backoff_of_its_own_a_task_gets_the_base(options):
    policy = plain(base=3.0, task_options=options_of({"t": options}))
    assert policy.retry_at("t", 2, NOW) == NOW + timedelta(seconds=6)


def test_the_failed_attempts_task_is_the_one_asked_about():
    task_options = options_of({})
    plain(task_options=task_options).failed(job(task="mine.task"), {"message": "x"}, NOW)
    assert task_options.calls == ["mine.task"]


def test_retry_on_retries_its_exceptions_and_their_subclasses_only():
    policy = plain(base=1.0, task_options=options_of({"picky": SimpleNamespace(retry_on=(LookupError,), backoff=None)}))
    for exc in (LookupError("x"), KeyError("k"), IndexError("i")):
        outcome = policy.raised(job(task="picky"), exc, NOW)
        assert outcome.status == Status.PENDING and outcome.retry_at == NOW + timedelta(seconds=1), exc
    for exc in (ValueError("v"), RuntimeError("r")):
        outcome = policy.raised(job(task="picky"), exc, NOW)
        # Failed at once, attempts left or not: a retry would raise the same.
        assert outcome.status == Status.FAILED and outcome.retry_at is None, exc
        assert outcome.error["exception_class"] == class_path(exc)


def test_retry_on_a_single_class():
    policy = plain(task_options=options_of({"t": SimpleNamespace(retry_on=ValueError, backoff=None)}))
    assert policy.raised(job(task="t"), ValueError(), NOW).status == Status.PENDING
    assert policy.raised(job(task="t"), TypeError(), NOW).status == Status.FAILED


def test_without_retry_on_every_exception_is_retried():
    policy = plain(task_options=options_of({"t": SimpleNamespace(retry_on=None, backoff=None)}))
    for exc in (ValueError(), SystemExit(3), Outer.Inner()):
        assert policy.raised(job(task="t"), exc, NOW).status == Status.PENDING


def test_retry_on_does_not_apply_to_timeouts_and_lost_attempts():
    # An exception of the task's own is what retry_on chooses among; a
    # timeout is retried while attempts remain.
    policy = plain(task_options=options_of({"t": SimpleNamespace(retry_on=(KeyError,), backoff=None)}))
    assert policy.timed_out(job(task="t", timeout=1.0), NOW).status == Status.PENDING
    assert policy.failed(job(task="t"), {"message": "lost"}, NOW).status == Status.PENDING


# -- endings -------------------------------------------------------------------


def test_failed_retries_while_attempts_remain_then_fails():
    policy = plain(base=2.0)
    error = {"message": "boom"}
    first = policy.failed(job(attempt=1, max_attempts=3), error, NOW)
    assert (first.status, first.retry_at, first.error) == (Status.PENDING, NOW + timedelta(seconds=2), error)
    second = policy.failed(job(attempt=2, max_attempts=3), error, NOW)
    assert second.retry_at == NOW + timedelta(seconds=4)
    last = policy.failed(job(attempt=3, max_attempts=3), error, NOW)
    assert (last.status, last.retry_at, last.error) == (Status.FAILED, None, error)
    # An attempt past max_attempts (the limit was lowered since the claim) fails too.
    assert policy.failed(job(attempt=5, max_attempts=3), error, NOW).status == Status.FAILED


def test_an_outcome_names_its_attempt():
    outcome = plain().failed(job(attempt=2, max_attempts=3, worker="disp-7"), {"message": "x"}, NOW)
    assert (outcome.job_id, outcome.worker, outcome.attempt) == (9, "disp-7", 2)
    assert not outcome.snoozed and outcome.result_json is None


def test_raised_records_the_exception():
    exc = raised_here(Outer.Inner("it broke"))
    outcome = plain().raised(job(attempt=1, worker="disp-7"), exc, NOW)
    assert outcome.status == Status.PENDING
    error = outcome.error
    assert error["exception_class"] == f"{__name__}.Outer.Inner"
    assert error["message"] == "it broke"
    assert (error["attempt"], error["worker"], error["time"]) == (1, "disp-7", NOW.isoformat())
    assert "raised_here" in error["traceback"] and error["traceback"].rstrip().endswith("Outer.Inner: it broke")


def test_raised_keeps_a_given_traceback_even_an_empty_one():
    exc = raised_here(ValueError("v"))
    assert plain().raised(job(), exc, NOW, traceback_text="").error["traceback"] == ""
    assert plain().raised(job(), exc, NOW, traceback_text="from the worker").error["traceback"] == "from the worker"


def test_an_exception_whose_message_cannot_be_read_is_recorded_all_the_same():
    class Unreadable(Exception):
        def __str__(self):
            raise LookupError("no")

    outcome = plain().raised(job(), Unreadable(), NOW, traceback_text="")
    assert outcome.status == Status.PENDING
    assert outcome.error["message"] == "<the exception's message could not be read: LookupError>"


def test_fatal_fails_with_attempts_left_and_may_say_why_in_its_own_words():
    exc = ValueError("raw")
    outcome = RetryPolicy.fatal(job(attempt=1, max_attempts=5), exc, NOW, message="the reason", traceback_text="")
    assert (outcome.status, outcome.retry_at) == (Status.FAILED, None)
    assert outcome.error["exception_class"] == "builtins.ValueError"
    assert outcome.error["message"] == "the reason" and outcome.error["time"] == NOW.isoformat()
    assert RetryPolicy.fatal(job(), exc, NOW).error["message"] == "raw"


def test_timed_out_is_a_failure_that_is_retried_while_attempts_remain():
    policy = plain(base=4.0)
    retried = policy.timed_out(job(attempt=1, max_attempts=2, timeout=1.5), NOW)
    assert (retried.status, retried.retry_at) == (Status.PENDING, NOW + timedelta(seconds=4))
    assert retried.error["exception_class"] == TIMEOUT_CLASS
    assert retried.error["message"] == "Timed out after 1.5s; the late result is discarded."
    assert (retried.error["traceback"], retried.error["time"]) == ("", NOW.isoformat())
    last = policy.timed_out(job(attempt=2, max_attempts=2, timeout=30.0), NOW)
    assert (last.status, last.retry_at) == (Status.FAILED, None)
    assert last.error["message"].startswith("Timed out after 30s;")


def test_cancelled():
    outcome = RetryPolicy.cancelled(job(attempt=2))
    assert (outcome.status, outcome.attempt, outcome.error, outcome.retry_at) == (Status.CANCELLED, 2, None, None)


# -- succeeded ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, text",
    [
        (None, "null"),
        (0, "0"),
        ("", '""'),
        ([1, "a"], '[1, "a"]'),
        ({"k": [True, None]}, '{"k": [true, null]}'),
        ((1, 2), "[1, 2]"),
    ],
)
def test_succeeded_stores_the_value_as_json(value, text):
    outcome = plain().succeeded(job(), value, NOW)
    assert (outcome.status, outcome.result_json, outcome.error) == (Status.SUCCEEDED, text, None)


def test_succeeded_cleans_what_a_database_refuses():
    outcome = plain().succeeded(job(), {"a\x00": "b\ud800c"}, NOW)
    assert outcome.status == Status.SUCCEEDED
    assert outcome.result_json == storable.json_text({"a\ufffd": "b\ufffdc"})
    assert "\\u0000" not in outcome.result_json and "\\ud800" not in outcome.result_json


def recursive():
    value = []
    value.append(value)
    return value


def nested(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value, exception_class",
    [
        ({1, 2}, "builtins.TypeError"),
        (object(), "builtins.TypeError"),
        (float("nan"), "builtins.ValueError"),
        ({"x": float("inf")}, "builtins.ValueError"),
        (recursive(), "builtins.ValueError"),
        (nested(100_000), "builtins.RecursionError"),
    ],
)
def test_a_value_that_is_not_json_fails_for_good(value, exception_class):
    outcome = plain().succeeded(job(attempt=1, max_attempts=5), value, NOW)
    assert (outcome.status, outcome.retry_at, outcome.result_json) == (Status.FAILED, None, None)
    assert outcome.error["exception_class"] == exception_class
    assert outcome.error["message"].startswith("The task's return value cannot be stored as JSON: ")
    assert outcome.error["time"] == NOW.isoformat()


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1, "b": [2, 3]},  # json_text puts spaces after separators: 22 characters, 17 bytes compact
        "é" * 40,  # json_text escapes: 242 characters; 82 bytes of UTF-8
        ["😀", "☃"],  # astral and BMP, escaped: 26 characters; 14 bytes
    ],
)
def test_result_max_bytes_counts_compact_utf8_json(value):
    size = len(storable.compact_json(value).encode())
    assert len(storable.json_text(value)) > size  # what makes the case: the stored text is longer
    at_limit = plain(result_max_bytes=size).succeeded(job(), value, NOW)
    assert at_limit.status == Status.SUCCEEDED and at_limit.result_json == storable.json_text(value)
    over = plain(result_max_bytes=size - 1).succeeded(job(attempt=1, max_attempts=5), value, NOW)
    assert (over.status, over.retry_at, over.result_json) == (Status.FAILED, None, None)
    assert over.error["exception_class"] == RESULT_TOO_LARGE_CLASS
    assert f"is {size:,} bytes of JSON; at most {size - 1:,} are stored" in over.error["message"]
    assert "RESULT_MAX_BYTES" in over.error["message"]
    assert (over.error["traceback"], over.error["time"], over.error["attempt"]) == ("", NOW.isoformat(), 1)


def test_result_max_bytes_says_the_size_with_thousands_separators():
    outcome = plain(result_max_bytes=1000).succeeded(job(), "x" * 5000, NOW)
    assert "is 5,002 bytes of JSON; at most 1,000 are stored" in outcome.error["message"]


def test_without_result_max_bytes_any_size_is_stored():
    outcome = plain().succeeded(job(), "x" * 1_000_000, NOW)
    assert outcome.status == Status.SUCCEEDED and len(outcome.result_json) == 1_000_002


def test_a_none_result_is_never_too_large():
    assert plain(result_max_bytes=1).succeeded(job(), None, NOW).result_json == "null"


# -- snoozed -----------------------------------------------------------------------


def test_snoozed_is_pending_again_later_without_an_error():
    outcome = plain().snoozed(job(attempt=3, max_attempts=3, snoozes=4), 90, NOW)
    assert (outcome.status, outcome.retry_at, outcome.error) == (Status.PENDING, NOW + timedelta(seconds=90), None)
    assert outcome.snoozed and outcome.attempt == 3


def test_snoozed_at_zero_seconds_is_now():
    assert plain().snoozed(job(), 0, NOW).retry_at == NOW


def test_snoozing_past_the_limit_fails_the_attempt():
    policy = plain(base=2.0, max_snoozes=3)
    assert policy.snoozed(job(snoozes=2), 5, NOW).snoozed  # the third snooze is allowed
    retried = policy.snoozed(job(attempt=1, max_attempts=2, snoozes=3), 5, NOW)
    assert (retried.status, retried.snoozed, retried.retry_at) == (Status.PENDING, False, NOW + timedelta(seconds=2))
    assert retried.error["exception_class"] == SNOOZED_TOO_OFTEN_CLASS
    assert retried.error["message"].startswith("The task snoozed too often: 3 snoozes is the limit")
    assert retried.error["time"] == NOW.isoformat()
    last = policy.snoozed(job(attempt=2, max_attempts=2, snoozes=7), 5, NOW)
    assert (last.status, last.snoozed, last.retry_at) == (Status.FAILED, False, None)


# -- unstorable ---------------------------------------------------------------------


def test_unstorable_replaces_the_outcome_with_a_failure_that_keeps_only_its_attempt():
    stored = Outcome(5, "disp-2", 4, Status.SUCCEEDED, result_json='"x"', logs=((1.0, 20, "l", "m", ""),))
    outcome = RetryPolicy.unstorable(stored, "value too long for type character varying(255)", NOW)
    assert (outcome.job_id, outcome.worker, outcome.attempt, outcome.status) == (5, "disp-2", 4, Status.FAILED)
    assert (outcome.result_json, outcome.logs, outcome.retry_at, outcome.snoozed) == (None, (), None, False)
    error = outcome.error
    assert error["exception_class"] == UNSTORABLE_CLASS
    assert error["message"] == (
        "The attempt's outcome could not be stored (succeeded): value too long for type character varying(255)"
    )
    assert (error["attempt"], error["worker"], error["time"], error["traceback"]) == (4, "disp-2", NOW.isoformat(), "")


def test_unstorable_of_a_retry_fails_for_good():
    retry = Outcome(5, "w", 1, Status.PENDING, error={"message": "x"}, retry_at=NOW, snoozed=True)
    outcome = RetryPolicy.unstorable(retry, "no", NOW)
    assert (outcome.status, outcome.retry_at, outcome.snoozed) == (Status.FAILED, None, False)
    assert "(pending)" in outcome.error["message"]


def test_unstorable_cleans_and_bounds_the_databases_message():
    outcome = RetryPolicy.unstorable(Outcome(5, "w\x00", 1, Status.FAILED), "bad\x00byte \udcff " + "y" * 5000, NOW)
    message = outcome.error["message"]
    assert len(message) == storable.MESSAGE_MAX and "\x00" not in message and "\udcff" not in message
    assert "bad\ufffdbyte \ufffd" in message and outcome.error["worker"] == "w\ufffd"


# -- error entries ------------------------------------------------------------------


def test_error_entries_are_bounded():
    exc = raised_here(ValueError("m" * (storable.MESSAGE_MAX + 500)))
    long_traceback = "start " + "t" * storable.TRACEBACK_MAX + " the innermost frame"
    error = plain().raised(job(), exc, NOW, traceback_text=long_traceback).error
    assert error["message"] == "m" * storable.MESSAGE_MAX
    # The end of a traceback is kept: the frame that raised.
    assert len(error["traceback"]) == storable.TRACEBACK_MAX and error["traceback"].endswith(" the innermost frame")


def test_a_long_exception_class_path_is_cut_to_its_column():
    long_class = type("L" * 400, (Exception,), {})
    error = plain().raised(job(), long_class(), NOW, traceback_text="").error
    assert len(error["exception_class"]) == storable.EXCEPTION_CLASS_MAX
    assert error["exception_class"] == class_path(long_class())[: storable.EXCEPTION_CLASS_MAX]


def test_error_entries_are_cleaned_of_what_a_database_refuses():
    exc = ValueError("nul\x00 and \ud83d lone")
    error = plain().raised(job(worker="w\x00"), exc, NOW, traceback_text="tb\x00\udc80").error
    assert error["message"] == "nul\ufffd and \ufffd lone"
    assert error["traceback"] == "tb\ufffd\ufffd" and error["worker"] == "w\ufffd"


def test_error_entry_has_exactly_the_stored_keys():
    entry = error_entry(job(attempt=2), exception_class="a.B", message=3, traceback_text="", now=NOW)
    assert entry == {
        "attempt": 2,
        "time": NOW.isoformat(),
        "worker": "w-1",
        "exception_class": "a.B",
        "message": "3",
        "traceback": "",
    }


# -- now is the caller's --------------------------------------------------------------


def every_time(outcome):
    """Return the times an outcome states: its retry time and its error's time."""
    times = []
    if outcome.retry_at is not None:
        times.append(outcome.retry_at)
    if outcome.error is not None:
        times.append(datetime.fromisoformat(outcome.error["time"]))
    return times


def test_every_time_in_every_outcome_comes_from_the_callers_now():
    policy = RetryPolicy(base=3.0, jitter=0.0, max_snoozes=1, result_max_bytes=4)
    at = NOW
    outcomes = {
        "failed": policy.failed(job(), {"time": at.isoformat()}, at),
        "raised": policy.raised(job(), ValueError("x"), at),
        "raised, last": policy.raised(job(attempt=3), ValueError("x"), at),
        "fatal": policy.fatal(job(), ValueError("x"), at),
        "timed out": policy.timed_out(job(timeout=1), at),
        "timed out, last": policy.timed_out(job(attempt=3, timeout=1), at),
        "not JSON": policy.succeeded(job(), {1, 2}, at),
        "too large": policy.succeeded(job(), "long enough", at),
        "snoozed": policy.snoozed(job(), 60, at),
        "snoozed too often": policy.snoozed(job(snoozes=1), 60, at),
        "unstorable": policy.unstorable(Outcome(9, "w", 1, Status.SUCCEEDED), "no", at),
    }
    expected = {
        "failed": [at + timedelta(seconds=3), at],
        "raised": [at + timedelta(seconds=3), at],
        "raised, last": [at],
        "fatal": [at],
        "timed out": [at + timedelta(seconds=3), at],
        "timed out, last": [at],
        "not JSON": [at],
        "too large": [at],
        "snoozed": [at + timedelta(seconds=60)],
        "snoozed too often": [at + timedelta(seconds=3), at],
        "unstorable": [at],
    }
    for name, outcome in outcomes.items():
        times = every_time(outcome)
        assert times == expected[name], name
        # Written as given: the caller's zone, to the microsecond.
        assert all(t.utcoffset() == at.utcoffset() for t in times), name
    assert outcomes["raised"].error["time"] == "2001-02-03T04:05:06.789000+05:30"
