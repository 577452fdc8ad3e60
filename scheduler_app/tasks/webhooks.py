"""The HTTP client of the built-in ``call_webhook`` task, safe by default (invariant 12, docs/ARCHITECTURE.md).

A job names the URL, so without care a job is a way into the network the
dispatcher sits in (cloud metadata at 169.254.169.254, admin ports on
localhost, the database). So:

- the URL's host is resolved once, and every address it resolves to must be
  a public one: loopback, private, link-local, multicast, reserved,
  unspecified and other non-global addresses (IPv4 and IPv6, IPv4 inside
  IPv6 too) are refused unless ``SCHEDULER["WEBHOOK_ALLOWED_HOSTS"]`` lists
  the host for the URL's port (``host:port``; a bare host: ports 80 and 443);
- the connection goes to the address that was checked: no second lookup
  that a DNS rebinding could answer differently (TLS still verifies the
  certificate against the host name);
- redirects are not followed: a 3xx answer is the result;
- only GET, POST, PUT, PATCH and DELETE; the job's headers may not set
  ``Host``, ``Content-Length`` or hop-by-hop headers;
- one deadline for the whole exchange (``WEBHOOK_TIMEOUT``; a job may ask
  for less): lookup, connect, TLS, request, status line, headers, 1xx
  answers, body and trailers (``wire.py``); at most
  ``WEBHOOK_MAX_BODY`` bytes of the answer are kept.

A refusal raises ``WebhookRefused`` before anything is sent; a malformed
answer, a broken connection or an answer of 4xx or 5xx raises
``WebhookFailed``, the deadline ``WebhookTimeout``; the job fails with that
message (printable text: bytes the peer sent are shown escaped).
"""

import ipaddress
import json
import math
import re
import urllib.parse

from .. import conf
from ..validation.hosts import allowed_entry, normal_host
from . import wire

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
# Set by the client from the URL and the body, or meaningful only between
# two hops (RFC 9110 7.6.1), never by a job.
FORBIDDEN_HEADERS = frozenset(
    {"host", "content-length", "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade"}
)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# A host listed without a port may be called on these ports only.
DEFAULT_PORTS = (80, 443)
# IPv6 prefixes that carry an IPv4 address in their last 32 bits (NAT64).
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class WebhookRefused(PermissionError):
    """The request was not sent: it names a forbidden address, method or header."""

    # Stored data: attempts record the class by this path (where it was first defined).
    __module__ = "scheduler_app.webhooks"


class WebhookFailed(RuntimeError):
    """The exchange failed: a 4xx or 5xx answer (``status``), a malformed answer, a broken connection."""

    # Stored data: attempts record the class by this path (where it was first defined).
    __module__ = "scheduler_app.webhooks"

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class WebhookTimeout(WebhookFailed, TimeoutError):
    """The exchange did not end within its deadline."""

    # Stored data: attempts record the class by this path (where it was first defined).
    __module__ = "scheduler_app.webhooks"


def call(url, *, method="POST", payload=None, headers=None, timeout=None):
    """Send one request; return ``{"status", "body", "truncated"}`` (and ``"location"`` for a 3xx)."""
    method = _method(method)
    target = _Target(url)
    body = None if payload is None else json.dumps(payload).encode()
    fields = _request_fields(headers, json_body=body is not None)
    seconds = _timeout(timeout)
    deadline = wire.Deadline(seconds)
    request = wire.request_bytes(method, target.request_target, target.host_header, fields, body)
    try:
        address = target.checked_address(allowed_hosts(), deadline)
        status, answer, content, truncated = wire.exchange(
            address, target.host, target.https, request, deadline, conf.get("WEBHOOK_MAX_BODY")
        )
    except wire.DeadlinePassed as exc:
        raise WebhookTimeout(
            f"{method} {target.shown_url} did not answer within {seconds:g} s (gave up {exc})."
        ) from None
    except wire.WireError as exc:
        raise WebhookFailed(f"{method} {target.shown_url} {exc}.") from exc
    text = content.decode("utf-8", "replace").replace("\x00", "\ufffd")  # storable as JSON everywhere
    if 200 <= status < 300:
        return {"status": status, "body": text, "truncated": truncated}
    if 300 <= status < 400:
        location = answer.get("location", [b""])[0].decode("utf-8", "replace")  # no NUL: the wire refuses it
        return {"status": status, "body": text, "truncated": truncated, "location": location}
    raise WebhookFailed(f"{method} {target.shown_url} answered HTTP {status}: {text[:200]}", status=status)


def allowed_hosts():
    """Return the allow-list as ``{(host, port or None)}``; entries the system checks refuse are skipped."""
    allowed, entries = set(), conf.get("WEBHOOK_ALLOWED_HOSTS")
    for entry in entries if isinstance(entries, (list, tuple)) else ():
        try:
            allowed.add(allowed_entry(entry))
        except ValueError:
            continue  # reported by the system checks (E006); skipping one allows less, never more
    return allowed


def refusal_reason(ip):
    """Return why a job may not reach ``ip`` (an ``ipaddress`` address), or None for a public one."""
    if ip.version == 6:
        embedded = (
            ip.ipv4_mapped or ip.sixtofour or (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None)
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
            port = 0
        if port == 0:  # urlsplit reads "host:0" as port 0, which is no port to connect to
            raise WebhookRefused("The URL's port is not a number from 1 to 65535.")
        self.https = parts.scheme == "https"
        self.host = parts.hostname  # lower-case, IPv6 without brackets
        default = 443 if self.https else 80
        self.port = port or default
        shown_host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = shown_host if self.port == default else f"{shown_host}:{self.port}"
        self.listed_as = shown_host if self.port in DEFAULT_PORTS else f"{shown_host}:{self.port}"
        self.request_target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.shown_url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))

    def listed(self, allowed):
        """Whether the allow-list names this host for this port (a bare entry: ports 80 and 443)."""
        host = normal_host(self.host)
        return (host, self.port) in allowed or ((host, None) in allowed and self.port in DEFAULT_PORTS)

    def checked_address(self, allowed, deadline):
        """Resolve the host once; return the ``getaddrinfo`` entry to connect to, or raise WebhookRefused."""
        try:
            infos = wire.resolve(self.host, self.port, deadline)
        except (OSError, UnicodeError) as exc:
            raise WebhookFailed(f"Cannot resolve the host {self.host!r}: {exc}.") from None
        if not infos:
            raise WebhookFailed(f"The host {self.host!r} has no address.")
        if not self.listed(allowed):
            for info in infos:
                address = info[4][0]
                reason = refusal_reason(ipaddress.ip_address(address))
                if reason:
                    named = "" if address == self.host else f"resolves to {address}, which "
                    where = (
                        "the host name"
                        if self.port in DEFAULT_PORTS
                        else f"{self.listed_as!r} (a host without a port allows ports 80 and 443 only)"
                    )
                    raise WebhookRefused(
                        f"Refused to call {self.host!r}: it {named}is a {reason} address. "
                        f"Add {where} to SCHEDULER['WEBHOOK_ALLOWED_HOSTS'] to allow it."
                    )
        return infos[0]


def _method(method):
    name = method.upper() if isinstance(method, str) else None
    if name not in METHODS:
        raise WebhookRefused(f"The method must be one of {', '.join(METHODS)}.")
    return name


def _request_fields(headers, *, json_body):
    """Return the job's headers over the client's (names compared in any case); refuse what a job may not set."""
    fields = {"User-Agent": "scheduler-app-webhook/1.0", "Accept-Encoding": "identity"}
    if json_body:
        fields["Content-Type"] = "application/json"
    given = _headers(headers)
    lowered = {name.lower() for name in given}
    return {**{k: v for k, v in fields.items() if k.lower() not in lowered}, **given}


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
        if not isinstance(value, str) or _CONTROL.search(value):
            raise WebhookRefused(
                f"The value of the header {name!r} must be text without line breaks or other control characters."
            )
    if len({name.lower() for name in headers}) < len(headers):
        raise WebhookRefused("headers names a header twice (names are compared in any case).")
    return dict(headers)


def _timeout(requested):
    limit = conf.get("WEBHOOK_TIMEOUT")
    if requested is None:
        return limit
    if (
        isinstance(requested, bool)
        or not isinstance(requested, (int, float))
        or not (math.isfinite(requested) and requested > 0)
    ):
        raise WebhookRefused("timeout must be a number of seconds greater than 0.")
    return min(float(requested), limit)
