"""The HTTP client of the built-in ``call_webhook`` task, safe by default (DESIGN invariant 12).

A job names the URL, so without care a job is a way into the network the
dispatcher sits in (cloud metadata at 169.254.169.254, admin ports on
localhost, the database). So:

- the URL's host is resolved once, and every address it resolves to must be
  a public one: loopback, private, link-local, multicast, reserved,
  unspecified and other non-global addresses (IPv4 and IPv6, IPv4 inside
  IPv6 too) are refused unless the host name is listed in
  ``SCHEDULER["WEBHOOK_ALLOWED_HOSTS"]``;
- the connection goes to the address that was checked: no second lookup
  that a DNS rebinding could answer differently (TLS still verifies the
  certificate against the host name);
- redirects are not followed: a 3xx answer is the result;
- only GET, POST, PUT, PATCH and DELETE; the job's headers may not set
  ``Host``, ``Content-Length`` or hop-by-hop headers;
- one deadline for the whole exchange (``WEBHOOK_TIMEOUT``; a job may ask
  for less), and at most ``WEBHOOK_MAX_BODY`` bytes of the answer are kept.

A refusal raises ``WebhookRefused`` before anything is sent; the job fails
with that message.
"""

import http.client
import ipaddress
import json
import math
import re
import socket
import ssl
import time
import urllib.parse

from . import conf

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
# Set by the client from the URL and the body, or meaningful only between
# two hops (RFC 9110 7.6.1), never by a job.
FORBIDDEN_HEADERS = frozenset(
    {"host", "content-length", "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade"}
)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CHUNK = 64 * 1024
# IPv6 prefixes that carry an IPv4 address in their last 32 bits (NAT64).
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class WebhookRefused(PermissionError):
    """The request was not sent: it names a forbidden address, method or header."""


class WebhookFailed(RuntimeError):
    """The server answered with a status that is neither 2xx nor 3xx."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


def call(url, *, method="POST", payload=None, headers=None, timeout=None):
    """Send one request; return ``{"status", "body", "truncated"}`` (and ``"location"`` for a 3xx)."""
    method = _method(method)
    target = _Target(url)
    all_headers = {"User-Agent": "scheduler-app-webhook/1.0", **_headers(headers)}
    body = None
    if payload is not None:
        body = json.dumps(payload).encode()
        if not any(k.lower() == "content-type" for k in all_headers):
            all_headers["Content-Type"] = "application/json"
    seconds = _timeout(timeout)
    deadline = time.monotonic() + seconds
    address = target.checked_address(allowed_hosts())
    connection = target.connection(address, seconds)
    try:
        connection.request(method, target.request_target, body=body, headers=all_headers)
        sock = connection.sock
        _left(sock, deadline)
        response = connection.getresponse()
        content, truncated = _read(response, sock, deadline, conf.get("WEBHOOK_MAX_BODY"))
    finally:
        connection.close()
    text = content.decode("utf-8", "replace").replace("\x00", "\ufffd")  # storable as JSON everywhere
    status = response.status
    if 200 <= status < 300:
        return {"status": status, "body": text, "truncated": truncated}
    if 300 <= status < 400:
        location = (response.getheader("Location") or "").replace("\x00", "\ufffd")
        return {"status": status, "body": text, "truncated": truncated, "location": location}
    raise WebhookFailed(f"{method} {target.shown_url} answered HTTP {status}: {text[:200]}", status=status)


def allowed_hosts():
    """Return the allow-listed host names, normalised as URLs carry them."""
    return {_normal_host(h) for h in conf.get("WEBHOOK_ALLOWED_HOSTS")}


def _normal_host(name):
    return name.strip().strip("[]").rstrip(".").lower()


def refusal_reason(ip):
    """Return why a job may not reach ``ip`` (an ``ipaddress`` address), or None for a public one."""
    if ip.version == 6:
        embedded = ip.ipv4_mapped or ip.sixtofour or (
            ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None
        )
        if embedded is not None:
            reason = refusal_reason(embedded)
            return f"{reason} (IPv4 inside IPv6)" if reason else None
    for attribute, reason in (
        ("is_unspecified", "unspecified"),
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_multicast", "multicast"),
        ("is_reserved", "reserved"),
        ("is_private", "private"),
    ):
        if getattr(ip, attribute):
            return reason
    if not ip.is_global:  # shared address space (100.64/10) and the like
        return "not globally reachable"
    return None


class _Target:
    """A URL taken apart once; everything later uses these parts."""

    def __init__(self, url):
        if not isinstance(url, str) or not url.isascii() or any(c <= " " or c == "\x7f" for c in url):
            raise WebhookRefused(
                "The URL must be ASCII text without spaces or control characters "
                "(percent-encode them; write international host names in punycode)."
            )
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise WebhookRefused(f"Only http and https URLs are allowed, not {parts.scheme!r}.")
        if parts.username is not None or parts.password is not None:
            raise WebhookRefused("Credentials in the URL are not sent; put them in a header (e.g. Authorization).")
        if not parts.hostname:
            raise WebhookRefused("The URL has no host.")
        try:
            port = parts.port
        except ValueError:
            raise WebhookRefused("The URL's port is not a number from 0 to 65535.") from None
        self.https = parts.scheme == "https"
        self.host = parts.hostname  # lower-case, IPv6 without brackets
        self.port = port or (443 if self.https else 80)
        self.request_target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.shown_url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))

    def checked_address(self, allowed):
        """Resolve the host once; return the ``getaddrinfo`` entry to connect to, or raise WebhookRefused."""
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise WebhookFailed(f"Cannot resolve the host {self.host!r}: {exc}.") from None
        if not infos:
            raise WebhookFailed(f"The host {self.host!r} has no address.")
        if _normal_host(self.host) not in allowed:
            for info in infos:
                address = info[4][0]
                reason = refusal_reason(ipaddress.ip_address(address))
                if reason:
                    named = "" if address == self.host else f"resolves to {address}, which "
                    raise WebhookRefused(
                        f"Refused to call {self.host!r}: it {named}is a {reason} address. "
                        "Add the host name to SCHEDULER['WEBHOOK_ALLOWED_HOSTS'] to allow it."
                    )
        return infos[0]

    def connection(self, address, timeout):
        if self.https:
            return _PinnedHTTPSConnection(self.host, self.port, address, timeout)
        return _PinnedHTTPConnection(self.host, self.port, address, timeout)


def _connect(address, timeout):
    """Open a TCP connection to one ``getaddrinfo`` entry: no name, so no lookup at all."""
    family, kind, proto, _, sockaddr = address
    sock = socket.socket(family, kind, proto)
    try:
        sock.settimeout(timeout)
        sock.connect(sockaddr)
    except BaseException:
        sock.close()
        raise
    return sock


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the address that was checked; the Host header still names the host."""

    def __init__(self, host, port, address, timeout):
        super().__init__(host, port, timeout=timeout)
        self.checked_address = address

    def connect(self):
        self.sock = _connect(self.checked_address, self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """As above, then TLS with the host name (SNI, certificate check)."""

    def __init__(self, host, port, address, timeout):
        self.tls = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self.tls)
        self.checked_address = address

    def connect(self):
        self.sock = self.tls.wrap_socket(_connect(self.checked_address, self.timeout), server_hostname=self.host)


def _method(method):
    name = method.upper() if isinstance(method, str) else None
    if name not in METHODS:
        raise WebhookRefused(f"The method must be one of {', '.join(METHODS)}.")
    return name


def _headers(headers):
    if headers is None:
        return {}
    if not isinstance(headers, dict):
        raise WebhookRefused("headers must be a JSON object of header names to text values.")
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise WebhookRefused("Header names must be letters, digits and -!#$%&'*+.^_`|~ only.")
        lowered = name.lower()
        if lowered in FORBIDDEN_HEADERS or lowered.startswith("proxy-"):
            raise WebhookRefused(
                f"The header {name!r} may not be set by a job: Host and Content-Length come from the URL "
                "and the body, and hop-by-hop headers (Connection, Keep-Alive, Proxy-*, TE, Trailer, "
                "Transfer-Encoding, Upgrade) are the client's."
            )
        if not isinstance(value, str) or any(c in value for c in "\r\n\x00"):
            raise WebhookRefused(f"The value of the header {name!r} must be text without line breaks.")
    return dict(headers)


def _timeout(requested):
    limit = conf.get("WEBHOOK_TIMEOUT")
    if requested is None:
        return limit
    if isinstance(requested, bool) or not isinstance(requested, (int, float)) or not (
        math.isfinite(requested) and requested > 0
    ):
        raise WebhookRefused("timeout must be a number of seconds greater than 0.")
    return min(float(requested), limit)


def _left(sock, deadline):
    """Give the socket what is left of the deadline (TimeoutError when nothing is)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("The webhook did not answer within the time-out.")
    if sock is not None:
        try:
            sock.settimeout(left)
        except OSError:
            pass  # closed by the response already; its own time-out still holds


def _read(response, sock, deadline, limit):
    """Return ``(at most limit bytes of the body, whether there was more)``."""
    chunks, size = [], 0
    while size <= limit:
        _left(sock, deadline)
        chunk = response.read1(min(_CHUNK, limit + 1 - size))  # what has arrived: a drip cannot outlast the deadline
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    content = b"".join(chunks)
    return content[:limit], len(content) > limit
