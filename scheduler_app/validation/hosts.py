"""What ``SCHEDULER["WEBHOOK_ALLOWED_HOSTS"]`` may list: ``host``, ``host:port``, ``[v6]``, ``[v6]:port``.

One parser for the system check of the setting and for the webhook client
(``tasks.webhooks``), so the two never disagree. Pure: standard library only.
"""

import ipaddress
import re

_HOST = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?")


def allowed_entry(entry):
    """Return ``(host, port or None)`` for a WEBHOOK_ALLOWED_HOSTS entry; ValueError if it is not one.

    An entry is ``host``, ``host:port``, ``[v6 address]``, ``[v6 address]:port``
    or a bare IPv6 address; the host as URLs write it, any case, a final dot ignored.
    """
    text = entry if isinstance(entry, str) else ""
    port = None
    if text.startswith("["):  # brackets for an IPv6 address only, as in URLs
        host, bracket, rest = text[1:].partition("]")
        if not bracket or ":" not in host or rest[:1] not in ("", ":"):
            raise _bad_entry(entry)
        port = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host = text
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _bad_entry(entry) from None
    elif not _HOST.fullmatch(host):
        raise _bad_entry(entry)
    if port is not None:
        if not (port.isascii() and port.isdigit()):
            raise _bad_entry(entry)
        if not 1 <= int(port) <= 65535:
            raise ValueError(f"{entry!r}: the port must be a number from 1 to 65535.")
        port = int(port)
    return normal_host(host), port


def _bad_entry(entry):
    return ValueError(
        f"{entry!r} is not a host with an optional port: write e.g. 'hooks.internal', 'hooks.internal:8080', "
        "'10.0.0.5:8443' or '[fd00::5]:8080' (a port from 1 to 65535; a host without one allows ports 80 and 443 only)."
    )


def normal_host(name):
    """Return one spelling of host ``name``: lower case, no final dot, an IPv6 address compressed."""
    name = name.strip().strip("[]").rstrip(".").lower()
    if ":" in name:  # one spelling of an IPv6 address ("0:0::1" is "::1")
        try:
            return ipaddress.IPv6Address(name).compressed
        except ValueError:
            pass
    return name
