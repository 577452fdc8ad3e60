"""call_webhook against peers that misbehave on the wire (scheduler_app/webhook_wire.py); all offline.

One deadline covers the whole exchange, whatever the peer trickles, and any
answer that is not well-formed HTTP/1.1 is a WebhookFailed with a printable
message. The time checks are hang guards (a call that returns in seconds
instead of running for a minute), never ratios.
"""

import socket
import struct
import time

import pytest
from django.test import override_settings

from scheduler_app import tasks
from scheduler_app.tasks import webhooks
from scheduler_app.tasks import wire as webhook_wire
from scheduler_app.tasks.webhooks import WebhookFailed, WebhookTimeout
from tests.tasks.rawhttp import allow_peer, answer

pytestmark = pytest.mark.once  # no database

HEAD = b"HTTP/1.1 200 OK\r\n"
HANG_GUARD = 5.0  # seconds: a 1 s deadline plus a generous margin; the old client ran for a minute


def call(peer, path="/hook", **kwargs):
    return tasks.call_webhook.call(f"{peer.url}{path}", method="GET", **kwargs)


def times_out(peer, stage, **kwargs):
    """Call with a 1 s deadline; assert it gave up at ``stage`` well before the peer would have finished."""
    started = time.monotonic()
    with allow_peer(peer, WEBHOOK_TIMEOUT=1), pytest.raises(WebhookTimeout) as info:
        call(peer, **kwargs)
    assert time.monotonic() - started < HANG_GUARD
    assert str(info.value) == f"GET {peer.url}/hook did not answer within 1 s (gave up {stage})."
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, WebhookFailed)


def fails(peer, message):
    with allow_peer(peer, WEBHOOK_TIMEOUT=5), pytest.raises(WebhookFailed) as info:
        call(peer)
    assert not isinstance(info.value, WebhookTimeout)
    assert str(info.value) == f"GET {peer.url}/hook {message}."
    assert str(info.value).isprintable()
    return info.value


# -- a slow peer holds a slot no longer than the deadline ---------------------------------


def test_a_header_trickled_one_byte_a_second(raw_peer):
    # The peer sent a byte a second to a 5 s deadline; here four a second to 1 s, for a minute.
    peer = raw_peer(lambda peer, conn: (conn.sendall(HEAD), peer.trickle(conn, b"X-Slow: " + b"a" * 240, 0.25)))
    times_out(peer, "while reading the headers")


def test_a_status_line_trickled(raw_peer):
    peer = raw_peer(lambda peer, conn: peer.trickle(conn, HEAD * 20, 0.25))
    times_out(peer, "while reading the status line")


def test_a_flood_of_100_continue_is_cut_off_by_count(raw_peer):
    peer = raw_peer(lambda peer, conn: peer.repeat(conn, b"HTTP/1.1 100 Continue\r\n\r\n", 0))
    fails(peer, f"sent more than {webhook_wire.MAX_INTERIM} interim (1xx) answers")


def test_a_slow_flood_of_100_continue_is_cut_off_by_the_deadline(raw_peer):
    peer = raw_peer(lambda peer, conn: peer.repeat(conn, b"HTTP/1.1 100 Continue\r\n\r\n", 0.25))
    times_out(peer, "while reading the status line")


def test_interim_answers_then_the_final_one(raw_peer):
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" * 3 + b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
    peer = raw_peer(answer(interim + b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"))
    with allow_peer(peer):
        assert call(peer) == {"status": 201, "body": "ok", "truncated": False}


@pytest.mark.parametrize(
    "head",
    [
        b"Content-Length: 100\r\n\r\n",  # sized
        b"Transfer-Encoding: chunked\r\n\r\n",  # chunked: one byte a chunk
        b"\r\n",  # until the peer closes
    ],
)
def test_a_slow_body(raw_peer, head):
    chunked = b"chunked" in head

    def script(peer, conn):
        conn.sendall(HEAD + head)
        peer.repeat(conn, b"1\r\n.\r\n" if chunked else b".", 0.25, times=240)

    times_out(raw_peer(script), "while reading the body")


def test_slow_chunked_trailers(raw_peer):
    def script(peer, conn):
        conn.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n")
        peer.trickle(conn, b"X-Checksum: " + b"0" * 240, 0.25)

    times_out(raw_peer(script), "while reading the trailers")


def test_chunked_body_and_trailers_are_read(raw_peer):
    body = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: 1\r\n\r\n"
    peer = raw_peer(answer(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + body))
    with allow_peer(peer):
        assert call(peer) == {"status": 200, "body": "hello world", "truncated": False}


def test_a_peer_that_accepts_and_says_nothing(raw_peer):
    times_out(raw_peer(lambda peer, conn: peer.stopped.wait(60)), "while reading the status line")


def test_an_https_peer_that_never_finishes_the_handshake(raw_peer):
    peer = raw_peer(lambda peer, conn: peer.stopped.wait(60))
    started = time.monotonic()
    with (
        allow_peer(peer, WEBHOOK_TIMEOUT=1),
        pytest.raises(WebhookTimeout, match=r"within 1 s \(gave up during the TLS handshake\)"),
    ):
        tasks.call_webhook.call(f"https://127.0.0.1:{peer.port}/hook")
    assert time.monotonic() - started < HANG_GUARD


def test_a_slow_lookup_counts_against_the_deadline(monkeypatch):
    def resolve(host, port, *args, **kwargs):
        time.sleep(10)  # a resolver that hangs (getaddrinfo has no time-out)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]

    monkeypatch.setattr(webhooks.wire.socket, "getaddrinfo", resolve)
    started = time.monotonic()
    with (
        override_settings(SCHEDULER={"WEBHOOK_TIMEOUT": 0.5}),
        pytest.raises(WebhookTimeout, match=r"within 0.5 s \(gave up while resolving the host name\)"),
    ):
        tasks.call_webhook.call("http://slow-dns.test/hook")
    assert time.monotonic() - started < HANG_GUARD


# -- a malformed answer is a clear error -------------------------------------------------------


@pytest.mark.parametrize(
    "data, message",
    [
        (b"XTTP/1.1 200 OK\x00\r\n\r\n", r"answered with a malformed status line 'XTTP/1.1 200 OK\x00'"),
        (b"HTTP/1.1 200 OK\x00\r\n\r\n", r"answered with a malformed status line 'HTTP/1.1 200 OK\x00'"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "answered with a malformed status line 'HTTP/1.1 2000 OK'"),
        (b"HTTP/2 200\r\n\r\n", "answered with a malformed status line 'HTTP/2 200'"),
        (b"\xff\xfe\r\n\r\n", r"answered with a malformed status line '\xff\xfe'"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "answered with a malformed status line 'SSH-2.0-OpenSSH_9.6'"),
        (b"", "closed the connection without answering"),
        (b"HTTP/1.1 200 OK\r\nContent-Le", "closed the connection in the middle of the headers"),
        (HEAD + b"no colon here\r\n\r\n", "sent a malformed header line 'no colon here'"),
        (HEAD + b"X-Evil: a\x00b\r\n\r\n", r"sent a malformed header line 'X-Evil: a\x00b'"),
        (HEAD + b"X-Evil : a\r\n\r\n", "sent a malformed header line 'X-Evil : a'"),
        (HEAD + b"\x01\x02\x03\r\n\r\n", r"sent a malformed header line '\x01\x02\x03'"),
        (HEAD + b"X-Big: " + b"a" * 70_000 + b"\r\n\r\n", "sent the headers of more than 64 KiB"),
        (HEAD + b"X-A: b\r\n" * 101 + b"\r\n", "sent more than 100 header lines"),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
            "switched protocols (101), which the request did not ask for",
        ),
        (HEAD + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", "sent a malformed Content-Length '5, 6'"),
        (HEAD + b"Content-Length: -1\r\n\r\n", "sent a malformed Content-Length '-1'"),
        (HEAD + b"Content-Length: 10\r\n\r\nhello", "closed the connection after 5 of the 10 bytes of the body"),
        (
            HEAD + b"Transfer-Encoding: gzip\r\n\r\nxx",
            "sent the body with the transfer coding 'gzip' (only chunked is read)",
        ),
        (HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", "sent a malformed chunk size line 'zz'"),
        (
            HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"f" * 20 + b"\r\n",
            "sent a malformed chunk size line 'ffffffffffffffffffff'",
        ),
        (
            HEAD + b"Transfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n",
            "sent a chunk longer than its size line says",
        ),
        (HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhel", "closed the connection in the middle of a chunk"),
        (
            HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
            "closed the connection in the middle of a chunk size line",
        ),
        (HEAD + b"Transfer-Encoding: chunked\r\n\r\n0\r\nX\x00: 1\r\n\r\n", r"sent a malformed header line 'X\x00: 1'"),
    ],
)
def test_a_malformed_answer_is_a_clear_error(raw_peer, data, message):
    fails(raw_peer(answer(data)), message)


def test_an_endless_header_block(raw_peer):
    peer = raw_peer(lambda peer, conn: (conn.sendall(HEAD), peer.repeat(conn, b"X-A: b\r\n", 0)))
    fails(peer, "sent more than 100 header lines")


def test_a_reset_in_the_middle_of_the_body(raw_peer):
    def script(peer, conn):
        conn.sendall(HEAD + b"Content-Length: 100000\r\n\r\n" + b"x" * 10)
        time.sleep(0.2)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST

    error = fails(raw_peer(script), "failed while reading the body: Connection reset by peer")
    assert error.status is None


def test_a_body_that_is_not_utf8_is_returned_as_text(raw_peer):
    peer = raw_peer(answer(HEAD + b"Content-Length: 8\r\n\r\n\xff\xfe\x00ok\xc3\xa9\x80"))
    with allow_peer(peer):
        assert call(peer) == {"status": 200, "body": "\ufffd\ufffd\ufffdok\u00e9\ufffd", "truncated": False}


def test_a_header_folded_over_two_lines_and_a_bare_lf(raw_peer):
    peer = raw_peer(answer(b"HTTP/1.0 302 Found\nLocation: /a\r\n\t/b\nX-Other: \xe9\n\nmoved"))
    with allow_peer(peer):
        assert call(peer) == {"status": 302, "body": "moved", "truncated": False, "location": "/a /b"}


def test_header_values_padded_with_long_runs_of_spaces(raw_peer):
    """A lazy value pattern before optional spaces took 18 s on one 30 KB header line."""
    padded = b"Location: /a" + b" " * 30_000 + b"b \t\r\n" + b"X-Fold: 1\r\n" + b" " * 30_000 + b"2\r\n"
    peer = raw_peer(answer(b"HTTP/1.1 302 Found\r\n" + padded + b"Content-Length: 0\r\n\r\n"))
    started = time.monotonic()
    with allow_peer(peer):
        assert call(peer)["location"] == "/a" + " " * 30_000 + "b"
    assert time.monotonic() - started < HANG_GUARD


def test_a_location_that_is_not_utf8(raw_peer):
    peer = raw_peer(answer(b"HTTP/1.1 301 Moved\r\nLocation: /\xff\r\nContent-Length: 0\r\n\r\n"))
    with allow_peer(peer):
        assert call(peer)["location"] == "/\ufffd"


def test_no_body_for_204_and_a_body_capped_when_chunked(raw_peer):
    peer = raw_peer(answer(b"HTTP/1.1 204 No Content\r\nContent-Length: 99\r\n\r\n"))
    with allow_peer(peer):
        assert call(peer) == {"status": 204, "body": "", "truncated": False}
    peer = raw_peer(
        lambda peer, conn: (
            conn.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n"),
            peer.repeat(conn, b"4\r\nabcd\r\n", 0),
        )
    )
    with allow_peer(peer, WEBHOOK_MAX_BODY=10):
        assert call(peer) == {"status": 200, "body": "abcdabcdab", "truncated": True}


def test_the_request_on_the_wire(raw_peer):
    peer = raw_peer(answer(HEAD + b"Content-Length: 0\r\n\r\n"))
    with allow_peer(peer):
        tasks.call_webhook.call(f"{peer.url}/p?q=1", payload={"a": "é"}, headers={"X-Token": "t", "user-agent": "mine"})
    head, _, body = peer.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /p?q=1 HTTP/1.1"
    assert set(lines[1:]) == {
        f"Host: 127.0.0.1:{peer.port}".encode(),
        b"Accept-Encoding: identity",
        b"Content-Type: application/json",
        b"X-Token: t",
        b"user-agent: mine",
        b"Content-Length: " + str(len(body)).encode(),
        b"Connection: close",
    }
    assert body == b'{"a": "\\u00e9"}'
