"""HTTP/1.1 on one connection within one deadline: the wire under ``webhooks.call``.

http.client reads an answer's head with blocking readline calls and skips
``100 Continue`` answers without a count, and a socket time-out bounds one
recv, not the whole: a peer sending one header byte a second, or one
``100 Continue`` after another, held a call for minutes. Here every step
(the lookup, connect, the TLS handshake, each send and each recv) gets only
what is left of one monotonic deadline, the head is read by bounded loops,
and an answer that is not well-formed HTTP/1.1 raises ``WireError`` with a
printable message. The request says ``Connection: close``: one exchange per
connection. No Django here.
"""

import re
import socket
import ssl
import threading
import time

MAX_HEAD = 64 * 1024  # bytes of one answer's status line and header lines (and of a chunked body's trailers)
MAX_FIELDS = 100  # header lines in one answer (http.client's bound too)
MAX_INTERIM = 10  # 1xx answers before the final one
_RECV = 64 * 1024

_STATUS = re.compile(rb"HTTP/1\.\d ([1-5]\d\d)(?: [\t\x20-\x7e\x80-\xff]*)?")
# Values are stripped in Python: a lazy match before optional spaces is quadratic on a long run of them.
_FIELD = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):([\t\x20-\x7e\x80-\xff]*)")
_FOLD = re.compile(rb"[ \t]([\t\x20-\x7e\x80-\xff]*)")  # obs-fold: continues the line before
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;[\t\x20-\x7e\x80-\xff]*)?")
_LENGTH = re.compile(rb"[0-9]{1,18}")


class WireError(Exception):
    """The exchange failed; the message reads after "METHOD URL" (e.g. "closed the connection ...")."""


class DeadlinePassed(WireError):
    """The deadline passed; the message says when ("while reading the headers")."""


class Deadline:
    """One monotonic deadline; ``left()`` raises DeadlinePassed once it has passed.

    ``stage`` says what the exchange is waiting for, for the message.
    """

    def __init__(self, seconds):
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.stage = "while resolving the host name"

    def left(self):
        left = self.end - time.monotonic()
        if left <= 0:
            raise DeadlinePassed(self.stage)
        return left


def shown(data, size=100):
    """Return at most ``size`` bytes as printable quoted text ('XTTP/1.1 200 OK\\x00')."""
    return ascii(bytes(data[:size]).decode("latin-1")) + ("..." if len(data) > size else "")


def resolve(host, port, deadline):
    """Return ``getaddrinfo(host, port)`` within the deadline.

    The C call has no time-out of its own, so it runs in a helper thread; past
    the deadline the call gives up and the thread ends with the resolver's own
    time-out.
    """
    outcome = {}

    def lookup():
        try:
            outcome["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome["error"] = exc

    thread = threading.Thread(target=lookup, name="webhook-lookup", daemon=True)
    thread.start()
    thread.join(deadline.left())
    if thread.is_alive():
        raise DeadlinePassed(deadline.stage)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["infos"]


def connect(address, host, tls, deadline):
    """Open a connection to one ``getaddrinfo`` entry (no name, so no second lookup); TLS checks ``host``."""
    family, kind, proto, _, sockaddr = address
    sock = socket.socket(family, kind, proto)
    try:
        sock.settimeout(deadline.left())
        sock.connect(sockaddr)
        if tls:
            deadline.stage = "during the TLS handshake"
            context = ssl.create_default_context()
            context.set_alpn_protocols(["http/1.1"])
            sock = context.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
            sock.settimeout(deadline.left())
            sock.do_handshake()  # one deadline for the whole handshake (CPython's ssl module)
    except BaseException:
        sock.close()
        raise
    return sock


def request_bytes(method, target, host_header, headers, body):
    """Return the request: its line, Host, the given headers, Content-Length, Connection: close, the body."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host_header}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body or b'')}")
    lines += ["Connection: close", "", ""]
    return "\r\n".join(lines).encode() + (body or b"")


def exchange(address, host, tls, request, deadline, limit):
    """Connect to ``address``, send ``request`` and read the final answer, all within the deadline.

    Return ``(status, fields, body, truncated)``: ``fields`` maps lower-case
    names to lists of raw values; ``body`` is at most ``limit`` bytes.
    """
    try:
        deadline.stage = "while connecting"
        with connect(address, host, tls, deadline) as connection:
            deadline.stage = "while sending the request"
            _send(connection, request, deadline)
            reader = _Reader(connection, deadline)
            status, fields = _final_head(reader)
            body, truncated = _body(reader, status, fields, limit)
    except TimeoutError:  # a step given the time left used it all
        raise DeadlinePassed(deadline.stage) from None
    except OSError as exc:  # refused, reset, unreachable, a TLS failure
        raise WireError(f"failed {deadline.stage}: {_reason(exc)}") from exc
    return status, fields, body, truncated


def _reason(exc):
    text = exc.strerror or str(exc) or type(exc).__name__
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _send(sock, data, deadline):
    view = memoryview(data)
    while view:
        sock.settimeout(deadline.left())
        view = view[sock.send(view[:_RECV]) :]


class _Reader:
    """Buffered reads; each recv waits at most for what is left of the deadline."""

    def __init__(self, sock, deadline):
        self.sock, self.deadline = sock, deadline
        self.buffer = bytearray()
        self.ended = False

    def _fill(self):
        if self.ended:
            return False
        self.sock.settimeout(self.deadline.left())
        data = self.sock.recv(_RECV)
        if not data:
            self.ended = True
            return False
        self.buffer += data
        return True

    def line(self, budget, what):
        """Return the next line without its line end, or None if it is longer than ``budget`` bytes."""
        searched = 0
        while (end := self.buffer.find(b"\n", searched)) < 0:
            if len(self.buffer) > budget + 1:  # + 1: the CR of a CRLF still to come
                return None
            searched = len(self.buffer)
            if not self._fill():
                raise WireError(f"closed the connection in the middle of {what}")
        line = bytes(self.buffer[:end])
        line = line[:-1] if line.endswith(b"\r") else line
        if len(line) > budget:
            return None
        del self.buffer[: end + 1]
        return line

    def some(self, most):
        """Return 1 to ``most`` bytes, or b"" once the peer has closed."""
        if not self.buffer and not self._fill():
            return b""
        data = bytes(self.buffer[:most])
        del self.buffer[:most]
        return data


def _line(reader, budget, what):
    line = reader.line(budget, what)
    if line is None:
        raise WireError(f"sent {what} of more than {MAX_HEAD // 1024} KiB")
    return line


def _final_head(reader):
    """Read the interim (1xx) answers, at most MAX_INTERIM of them, and return the final one's head."""
    for _ in range(MAX_INTERIM + 1):
        reader.deadline.stage = "while reading the status line"
        if not reader.buffer and not reader._fill():
            raise WireError("closed the connection without answering")
        line = _line(reader, MAX_HEAD, "a status line")
        match = _STATUS.fullmatch(line)
        if not match:
            raise WireError(f"answered with a malformed status line {shown(line)}")
        reader.deadline.stage = "while reading the headers"
        fields = _fields(reader, MAX_HEAD - len(line), "the headers")
        status = int(match[1])
        if status == 101:
            raise WireError("switched protocols (101), which the request did not ask for")
        if status >= 200:
            return status, fields
    raise WireError(f"sent more than {MAX_INTERIM} interim (1xx) answers")


def _fields(reader, budget, what):
    """Read header lines up to an empty one: ``{lower-case name: [values]}``."""
    fields, last, count = {}, None, 0
    while True:
        line = _line(reader, budget, what)
        budget -= len(line) + 2
        if not line:
            return fields
        fold = _FOLD.fullmatch(line) if line[:1] in (b" ", b"\t") else None
        if fold and last is not None:  # RFC 9112 5.2: a client replaces obs-fold with a space
            fields[last][-1] = (fields[last][-1] + b" " + fold[1].strip(b" \t")).strip(b" \t")
            continue
        count += 1
        match = _FIELD.fullmatch(line)
        if not match:
            raise WireError(f"sent a malformed header line {shown(line)}")
        if count > MAX_FIELDS:
            raise WireError(f"sent more than {MAX_FIELDS} header lines")
        last = match[1].decode("ascii").lower()
        fields.setdefault(last, []).append(match[2].strip(b" \t"))


def _body(reader, status, fields, limit):
    """Read the body as its framing says (RFC 9112 6.3); keep at most ``limit`` bytes."""
    reader.deadline.stage = "while reading the body"
    if status in (204, 304):
        return b"", False
    if "transfer-encoding" in fields:
        codings = [c.strip().lower() for c in b",".join(fields["transfer-encoding"]).split(b",") if c.strip()]
        if codings != [b"chunked"]:
            raise WireError(
                f"sent the body with the transfer coding {shown(b', '.join(codings))} (only chunked is read)"
            )
        return _chunked(reader, limit)
    if "content-length" in fields:
        lengths = {v.strip() for value in fields["content-length"] for v in value.split(b",")}
        if len(lengths) != 1 or not _LENGTH.fullmatch(next(iter(lengths))):
            raise WireError(f"sent a malformed Content-Length {shown(b', '.join(fields['content-length']))}")
        return _sized(reader, int(lengths.pop()), limit)
    kept = _Kept(limit)
    while not kept.full and (data := reader.some(_RECV)):
        kept.add(data)
    return kept.result()


class _Kept:
    """Up to ``limit`` bytes of a body, and whether there was more."""

    def __init__(self, limit):
        self.limit, self.parts, self.size = limit, [], 0

    @property
    def full(self):
        return self.size > self.limit

    def add(self, data):
        data = data[: self.limit + 1 - self.size]
        self.parts.append(data)
        self.size += len(data)

    def result(self):
        return b"".join(self.parts)[: self.limit], self.full


def _sized(reader, length, limit):
    want, got, parts = min(length, limit), 0, []
    while got < want:
        data = reader.some(want - got)
        if not data:
            raise WireError(f"closed the connection after {got} of the {length} bytes of the body")
        parts.append(data)
        got += len(data)
    return b"".join(parts), length > limit


def _chunked(reader, limit):
    kept = _Kept(limit)
    while True:
        line = _line(reader, MAX_HEAD, "a chunk size line")
        match = _CHUNK_SIZE.fullmatch(line)
        if not match:
            raise WireError(f"sent a malformed chunk size line {shown(line)}")
        left = int(match[1], 16)
        if left == 0:
            break
        while left:
            data = reader.some(min(left, _RECV))
            if not data:
                raise WireError("closed the connection in the middle of a chunk")
            kept.add(data)
            left -= len(data)
        if kept.full:
            return kept.result()  # the rest is not read: the connection closes
        if reader.line(0, "the end of a chunk") != b"":  # None too: a longer line
            raise WireError("sent a chunk longer than its size line says")
    reader.deadline.stage = "while reading the trailers"
    _fields(reader, MAX_HEAD, "the trailers")  # read to the end of the answer, then dropped
    return kept.result()
