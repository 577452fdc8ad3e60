"""The one boundary that makes a task's values storable (DESIGN invariant 13): pure, no database."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_app.vocabulary import storable

FFFD = "\ufffd"


def test_nul_and_lone_surrogates_become_the_replacement_character():
    assert storable.clean_text("a\x00b") == f"a{FFFD}b"
    assert storable.clean_text("bad file-\udcff.txt") == f"bad file-{FFFD}.txt"
    assert storable.clean_text("\ud83d\ude00") == FFFD * 2  # surrogate code points, not an emoji
    assert storable.clean_text("caf\u00e9 \U0001f600") == "caf\u00e9 \U0001f600"  # real characters stay
    plain = "plain ascii"
    assert storable.clean_text(plain) is plain


def test_values_are_cleaned_everywhere_keys_included_without_recursion():
    value = {"k\x00": ["a\x00", {"x": "\udcff"}, 3, None, True], "n": 1.5}
    assert storable.clean_value(value) == {f"k{FFFD}": [f"a{FFFD}", {"x": FFFD}, 3, None, True], "n": 1.5}
    assert value["k\x00"][0] == "a\x00"  # the caller's value is not changed
    deep = current = []
    for _ in range(50_000):  # far past the recursion limit
        current.append([])
        current = current[0]
    current.append("\x00")
    cleaned = storable.clean_value(deep)
    for _ in range(50_000):
        cleaned = cleaned[0]
    assert cleaned == [FFFD]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a\x00b", f"a{FFFD}b"),
        ("bad file-\udcff.txt", f"bad file-{FFFD}.txt"),
        ({"\x00": ["\udc80"]}, {FFFD: [FFFD]}),
        ("\U0001f600 and \\u0000 written out", "\U0001f600 and \\u0000 written out"),
    ],
)
def test_json_text_has_no_nul_or_lone_surrogate_escape(value, expected):
    text = storable.json_text(value)
    assert "\\u0000" not in text.replace("\\\\", "")
    assert json.loads(text) == expected
    assert storable.clean_json_text(json.dumps(value)) == text


def test_json_text_refuses_what_json_cannot_say():
    with pytest.raises(TypeError):
        storable.json_text({1, 2})
    with pytest.raises(ValueError):
        storable.json_text(float("nan"))


@given(st.recursive(st.text() | st.integers() | st.none(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)))
def test_any_value_comes_out_as_utf8_json_without_nul(value):
    text = storable.json_text(value)
    decoded = json.loads(text)
    dumped = json.dumps(decoded, ensure_ascii=False)
    dumped.encode("utf-8")  # no lone surrogate
    assert "\x00" not in dumped


def test_log_records_fit_their_columns():
    name = "x" * 254 + "\x00" + "tail"
    moment, level, logger, message, exc = storable.log_record((1.5, 40000, name, "m\x00", None))
    assert (moment, level, message, exc) == (1.5, 32767, f"m{FFFD}", "")
    assert logger == "x" * 254 + FFFD and len(logger) == storable.LOGGER_MAX
    assert storable.log_level(-5) == 0 and storable.log_level("junk") == 0 and storable.log_level(20) == 20


def test_error_entries_are_cleaned_and_bounded():
    entry = storable.error_entry(
        {"exception_class": "C" * 1000, "message": "\udcff" * 5000, "traceback": "t" * 30000 + "END", "attempt": 1}
    )
    assert len(entry["exception_class"]) == storable.EXCEPTION_CLASS_MAX
    assert entry["message"] == FFFD * storable.MESSAGE_MAX
    assert len(entry["traceback"]) == storable.TRACEBACK_MAX and entry["traceback"].endswith("END")


def test_sizes_are_utf8_bytes():
    assert storable.utf8_size("abc") == 3
    assert storable.utf8_size("\U0001f600" * 10) == 40
    assert storable.utf8_size("\udcff") == 1


def test_a_result_is_measured_as_arguments_are_compact_utf8_json():
    from datetime import UTC, datetime

    from scheduler_app.vocabulary.policy import RESULT_TOO_LARGE_CLASS, RetryPolicy
    from tests.dispatcher.fake_executor import claimed_job

    now = datetime(2026, 1, 1, tzinfo=UTC)
    job = claimed_job(1)
    value = ["\u00e9" * 200, "x"]  # escaped: 1,214 characters; compact UTF-8: 408 bytes
    assert storable.json_size(value) == 408
    assert RetryPolicy(result_max_bytes=408).succeeded(job, value, now).status == "succeeded"
    too_large = RetryPolicy(result_max_bytes=407).succeeded(job, value, now)
    assert too_large.status == "failed" and too_large.error["exception_class"] == RESULT_TOO_LARGE_CLASS
    assert too_large.error["message"].startswith("The task's return value is 408 bytes of JSON; at most 407 are stored")
