"""What a stored value reads as, without a database: storable text, JSON, times, shapes, a bulk request's order."""

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from scheduler_app.lifecycle.depends_on import order
from scheduler_app.lifecycle.states import BulkValidationError
from scheduler_app.sql import readable
from scheduler_app.sql.readable import END_OF_TIME, START_OF_TIME, in_zone, json_reader, read_sqlite_time
from scheduler_app.vocabulary.storable import clean_text, clean_value

# Independent of the database: runs once, in the SQLite pass.
pytestmark = pytest.mark.once


@pytest.mark.parametrize(
    "text, clean",
    [
        ("plain", "plain"),
        ("é 😀", "é 😀"),
        ("a\x00b", "a\ufffdb"),
        ("x\udcff", "x\ufffd"),
        ("\ud83d\ude00", "\ufffd\ufffd"),  # two halves of a pair in a str are two lone surrogates
        ("\ud800\x00\udfff", "\ufffd\ufffd\ufffd"),
    ],
)
def test_clean_text_replaces_each_nul_and_lone_surrogate(text, clean):
    assert clean_text(text) == clean
    clean.encode("utf-8")


def test_clean_value_cleans_keys_and_values_at_any_depth():
    assert clean_value({"k\x00": ["x\udcff", {"y": ("z\x00", 1, None, 2.5)}]}) == {
        "k\ufffd": ["x\ufffd", {"y": ["z\ufffd", 1, None, 2.5]}]
    }
    deep = inner = []
    for _ in range(50_000):
        inner.append([])
        inner = inner[0]
    inner.append("\x00")
    cleaned = clean_value(deep)
    for _ in range(50_000):
        cleaned = cleaned[0]
    assert cleaned == ["\ufffd"]


def decode(text):
    return json.loads(text, cls=json_reader)


def test_json_with_lone_surrogates_or_nul_reads_with_replacement_characters():
    assert decode('{"\\udcff": ["\\u0000", "\\ud83d\\ude00", "\\ud800x"]}') == {"\ufffd": ["\ufffd", "😀", "\ufffdx"]}
    assert decode('"a\x00b"') == "a\ufffdb"  # a raw NUL: not JSON, read leniently
    assert decode("[1, 2]") == [1, 2] and decode("{}") == {}


@pytest.mark.parametrize("depth", [201, 2000, 100_000])
def test_json_deeper_than_pages_can_show_reads_as_its_text(depth):
    with pytest.raises(json.JSONDecodeError):
        decode("[" * depth + "]" * depth)


def test_json_as_deep_as_pages_can_show_reads():
    assert decode("[" * 200 + "]" * 200)
    wide = json.dumps([[i] for i in range(1000)])
    assert decode(wide) == [[i] for i in range(1000)]


@pytest.mark.parametrize(
    "text, read",
    [
        ("2026-03-01 09:00:00.5", datetime(2026, 3, 1, 9, 0, 0, 500000)),
        ("10000-01-01 00:00:00", END_OF_TIME),
        ("+12345-01-01", END_OF_TIME),
        ("infinity", END_OF_TIME),
        ("-infinity", START_OF_TIME),
        ("-0001-01-01 00:00:00", START_OF_TIME),
        ("2026-02-30 10:00:00", None),
        ("not a date", None),
        ("", None),
    ],
)
def test_sqlite_time_text(text, read):
    assert read_sqlite_time(text) == read


@pytest.mark.parametrize(
    "value, zone, shown",
    [
        (END_OF_TIME, "Asia/Tokyo", END_OF_TIME),
        (END_OF_TIME, "America/New_York", datetime(9999, 12, 31, 18, 59, 59, 999999)),
        (START_OF_TIME, "America/New_York", START_OF_TIME),
        (START_OF_TIME, "Asia/Tokyo", datetime(1, 1, 1, 9, 18, 59)),  # Tokyo's local mean time then
        (datetime(2026, 1, 1, tzinfo=UTC), "Asia/Tokyo", datetime(2026, 1, 1, 9)),
    ],
)
def test_in_zone_falls_back_to_utc_where_the_zone_has_no_such_date(value, zone, shown):
    got = in_zone(value, ZoneInfo(zone))
    assert got == value
    assert got.replace(tzinfo=None) == shown.replace(tzinfo=None)


def test_errors_of_any_shape_read_as_entries():
    assert readable.error_entries(None) == []
    assert readable.error_entries("oops") == [
        {"attempt": None, "time": "", "worker": "", "exception_class": "", "message": "oops", "traceback": ""}
    ]
    [entry] = readable.error_entries([{"attempt": 2, "message": {"a": 1}, "worker": 3, "time": None}])
    assert entry == {
        "attempt": 2,
        "time": "",
        "worker": "3",
        "exception_class": "",
        "message": '{"a": 1}',
        "traceback": "",
    }
    assert readable.error_entries([{"attempt": True}])[0]["attempt"] is None


def test_dispatcher_rows_of_any_shape():
    assert readable.worker_slots({"*": 4, "a": "2", "b": -1, "c": True, "d": 10**30}) == {"*": 4}
    assert readable.worker_slots([1]) == {} and readable.worker_queues("abc") == []
    assert readable.worker_queues(["a", 1, None, "b"]) == ["a", "b"]


# -- a bulk request's order: no recursion -----------------------------------------------


@pytest.mark.parametrize("n", [3, 1000, 20_000])
def test_a_chain_is_ordered_however_long(n):
    forward = {i: [i + 1] if i + 1 < n else [] for i in range(n)}
    assert order(forward) == list(range(n - 1, -1, -1))
    backward = {i: [i - 1] if i else [] for i in range(n)}
    assert order(backward) == list(range(n))


def test_a_cycle_is_named_however_long():
    n = 5000
    with pytest.raises(BulkValidationError) as caught:
        order({i: [(i + 1) % n] for i in range(n)})
    [(index, errors)] = caught.value.by_index.items()
    message = errors["depends_on_index"][0]
    assert (
        index == 0
        and message.startswith("Jobs 0 -> 1 -> 2 -> ")
        and message.endswith(f" -> {n - 1} -> 0 of this request depend on each other in a cycle.")
    )


def test_a_diamond_is_ordered_once_each():
    assert order({0: [1, 2], 1: [3], 2: [3], 3: []}) == [3, 1, 2, 0]
    with pytest.raises(BulkValidationError) as caught:
        order({0: [1], 1: [2], 2: [1]})
    assert caught.value.by_index == {
        1: {"depends_on_index": ["Jobs 1 -> 2 -> 1 of this request depend on each other in a cycle."]}
    }


def test_nan_and_infinities_become_none_at_any_depth():
    nan, inf = float("nan"), float("inf")
    assert readable.finite({"a": [1.5, nan, {"b": -inf, "c": "x"}], "d": (inf, 2)}) == {
        "a": [1.5, None, {"b": None, "c": "x"}],
        "d": [None, 2],
    }
    assert readable.finite(nan) is None and readable.finite(3) == 3


def test_an_error_time_with_an_offset_past_the_end_is_shown_as_it_is():
    from scheduler_app.admin.job_fields import error_time

    assert error_time("9999-12-31T23:00:00-05:00") == "9999-12-31 23:00:00 UTC-05:00"
    assert error_time("no time") == "no time"
