"""The wake-up message's wire format: what the one-statement enqueue sends is what encode() writes."""

import random

import pytest

from scheduler_app.vocabulary.wakeup import MAX_ITEMS, WakeUp


@pytest.mark.parametrize("seed", range(5))
def test_the_template_around_a_new_jobs_id_is_its_encoded_message(seed):
    rng = random.Random(seed)
    for _ in range(2000):
        at = rng.choice([rng.random() * 2e9, 1.5, 1e20, 1e-7, 1764000000.123456, float(rng.randint(0, 2**40)), 0.0])
        priority = rng.randint(-100, 100)
        queue = rng.choice(["default", 'quo"te', "é☃", "x" * 64, "back\\slash"])
        job_id = rng.randint(1, 2**62)
        prefix, suffix = WakeUp.template(at, priority, queue)
        text = f"{prefix}{job_id}{suffix}"
        assert text == WakeUp.of(jobs=[(job_id, at, priority, queue)]).encode()
        assert WakeUp.decode(text).jobs == ((job_id, at, priority, queue),)


def test_decode_reads_encode_and_asks_for_a_sync_on_anything_else():
    message = WakeUp.of(jobs=[(1, 2.5, 3, "q")], removed=[4], cancel=[5], schedules=[(6, None)], freed=["q"])
    assert WakeUp.decode(message.encode()) == message
    for garbage in ["", "[]", "{", '{"jobs": [[1]]}', "null", '{"jobs": "x"}']:
        assert WakeUp.decode(garbage).sync
    assert WakeUp.of(jobs=[(i, 0.0, 0, "q") for i in range(MAX_ITEMS + 1)]).sync
