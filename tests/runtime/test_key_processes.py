"""Concurrency keys with real dispatcher processes: each key's limit holds across all of them, other keys flow.

Overlaps are counted from the attempts' own start and end times, written by
the task itself (``keyed_span``: ``@options(concurrency_key="account:{account_id}",
concurrency_limit=2)``).
"""

import os

import pytest

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import most_at_once
from tests.runtime.test_limit_processes import dispatchers_for_this_database, log_tail, run_dispatchers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

KEYED = "tests.testapp.tasks.keyed_span"
SPAN = "tests.testapp.tasks.span"


def spans_by_account(marker_dir):
    found = {}
    for name in os.listdir(marker_dir):
        with open(os.path.join(marker_dir, name)) as fh:
            start, end = (float(x) for x in fh.read().split())
        account = name.split("-", 1)[0] if "-" in name and not name.split("-", 1)[0].isdigit() else None
        found.setdefault(account, []).append((start, end))
    return found


def test_a_keys_limit_holds_across_dispatchers_and_other_keys_progress(marker_dir, tmp_path):
    specs = [
        {"task": KEYED, "args": [marker_dir, account, 0.15], "queue": "slow"}
        for _ in range(8)
        for account in ("acme", "bolt", "core")
    ]
    # One key with a limit of 1, given at enqueue over the task's own.
    specs += [
        {"task": KEYED, "args": [marker_dir, "solo", 0.1], "queue": "slow", "concurrency_limit": 1} for _ in range(5)
    ]
    specs += [{"task": SPAN, "args": [marker_dir, 0.05], "queue": "slow"} for _ in range(6)]
    lifecycle.enqueue_many(specs)
    count = dispatchers_for_this_database()
    logs = [tmp_path / f"d{i}.log" for i in range(count)]
    assert run_dispatchers(count, logs=logs) == [0] * count, [log_tail(p) for p in logs]
    found = spans_by_account(marker_dir)
    assert {k: len(v) for k, v in found.items()} == {"acme": 8, "bolt": 8, "core": 8, "solo": 5, None: 6}
    for account in ("acme", "bolt", "core"):
        assert most_at_once(found[account]) == 2, account
    assert most_at_once(found["solo"]) == 1
    # Keys do not hold each other back: more than one key's jobs ran at once.
    keyed = [span for account, spans in found.items() if account for span in spans]
    assert most_at_once(keyed) > 2
    assert set(Job.objects.values_list("status", flat=True)) == {"succeeded"}
    assert set(Job.objects.values_list("attempts", flat=True)) == {1}


def test_keys_in_a_limited_queue_obey_both_limits_across_dispatchers(marker_dir, tmp_path):
    lifecycle.set_limits("slow", concurrency_limit=3)
    lifecycle.enqueue_many(
        [
            {"task": KEYED, "args": [marker_dir, account, 0.1], "queue": "slow"}
            for _ in range(6)
            for account in ("acme", "bolt")
        ]
        + [{"task": SPAN, "args": [marker_dir, 0.1], "queue": "slow"} for _ in range(4)]
    )
    count = dispatchers_for_this_database()
    logs = [tmp_path / f"d{i}.log" for i in range(count)]
    assert run_dispatchers(count, logs=logs) == [0] * count, [log_tail(p) for p in logs]
    found = spans_by_account(marker_dir)
    assert {k: len(v) for k, v in found.items()} == {"acme": 6, "bolt": 6, None: 4}
    assert most_at_once(found["acme"]) <= 2 and most_at_once(found["bolt"]) <= 2
    assert most_at_once([span for spans in found.values() for span in spans]) == 3
    assert set(Job.objects.values_list("status", flat=True)) == {"succeeded"}
