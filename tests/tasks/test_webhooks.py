"""The call_webhook task is safe by default (scheduler_app/webhooks.py); all offline.

A local HTTP server on 127.0.0.1 stands in for the outside world: it is
allow-listed for the cases that must get through, and it records every
request, so a refusal can be shown to have sent nothing.
"""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import override_settings

from scheduler_app import tasks
from scheduler_app.tasks import webhooks
from scheduler_app.tasks.webhooks import WebhookFailed, WebhookRefused, WebhookTimeout


class Handler(BaseHTTPRequestHandler):
    def _answer(self):
        self.server.received.append((self.command, self.path, dict(self.headers)))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        route = self.path.split("?")[0]
        if route == "/redirect-ftp":
            return self._send(302, b"moved", Location="ftp://127.0.0.1:21/pub/file")
        if route == "/redirect-secret":
            return self._send(302, b"", Location="/secret")
        if route == "/fail":
            return self._send(500, b"boom")
        if route == "/big":
            return self._send(200, b"x" * 200_000)
        if route == "/nul":
            return self._send(200, b"a\x00b\xff")
        # These two answer once the test is done with them (30 s at most):
        # a client that got anything from them did not keep its own deadline.
        if route == "/slow":
            self.server.release.wait(30)
            return self._send(200, b"late")
        if route == "/drip":
            self.send_response(200)
            self.send_header("Content-Length", "600")
            self.end_headers()
            for _ in range(600):  # a byte every 50 ms: no read ever waits long
                try:
                    self.wfile.write(b".")
                    self.wfile.flush()
                except OSError:  # the client gave up (a broken pipe)
                    return None
                if self.server.release.wait(0.05):
                    break
            return None
        echo = {
            "method": self.command,
            "path": self.path,
            "body": body.decode(),
            "host": self.headers["Host"],
            "token": self.headers.get("X-Token"),
            "type": self.headers.get("Content-Type"),
        }
        return self._send(200, json.dumps(echo).encode())

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_TRACE = _answer

    def _send(self, status, body, **headers):
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        """Keep the test output free of the server's request lines."""


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.received = []
    httpd.release = threading.Event()  # set at the end: /slow and /drip answer
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.listed = f"127.0.0.1:{httpd.server_address[1]}"  # its WEBHOOK_ALLOWED_HOSTS entry
    yield httpd
    httpd.release.set()
    httpd.shutdown()
    httpd.server_close()


def allow(*hosts, **more):
    return override_settings(SCHEDULER={"WEBHOOK_ALLOWED_HOSTS": list(hosts), **more})


def call(url, **kwargs):
    return tasks.call_webhook.call(url, **kwargs)


# -- what gets through -----------------------------------------------------------


def test_an_allow_listed_host_gets_json_and_headers(server):
    with allow(server.listed):
        result = call(f"{server.url}/hook?x=1", payload={"event": "done"}, headers={"X-Token": "s3cret"})
    assert result["status"] == 200 and result["truncated"] is False
    echo = json.loads(result["body"])
    assert echo["method"] == "POST" and echo["path"] == "/hook?x=1"
    assert json.loads(echo["body"]) == {"event": "done"} and echo["type"] == "application/json"
    assert echo["token"] == "s3cret" and echo["host"] == f"127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize("method", ["GET", "put", "PATCH", "DELETE"])
def test_the_allowed_methods(server, method):
    with allow(server.listed):
        assert json.loads(call(f"{server.url}/hook", method=method)["body"])["method"] == method.upper()


def test_the_allow_list_names_hosts_and_ignores_case_and_a_final_dot(server):
    port = server.server_address[1]
    with allow(f"LocalHost.:{port}"):
        assert call(f"http://localhost:{port}/hook")["status"] == 200


def test_4xx_and_5xx_fail_the_job(server):
    with allow(server.listed), pytest.raises(WebhookFailed, match="answered HTTP 500: boom") as info:
        call(f"{server.url}/fail", payload={})
    assert info.value.status == 500


# -- the allow-list names ports --------------------------------------------------------


def resolve_to(server, monkeypatch):
    """Make every name resolve to the server, whatever port the URL names (so ports 80 and 443 reach it)."""

    def resolve(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", server.server_address[1]))]

    monkeypatch.setattr(webhooks.wire.socket, "getaddrinfo", resolve)


def test_a_host_with_a_port_allows_that_port_only(server):
    port = server.server_address[1]
    with allow(f"127.0.0.1:{port}"):
        assert call(f"{server.url}/hook")["status"] == 200
    with allow(f"127.0.0.1:{port + 1}", "127.0.0.1"), pytest.raises(WebhookRefused) as info:
        call(f"{server.url}/hook")
    assert str(info.value) == (
        f"Refused to call '127.0.0.1': it is a loopback address. Add '127.0.0.1:{port}' (a host without a port "
        "allows ports 80 and 443 only) to SCHEDULER['WEBHOOK_ALLOWED_HOSTS'] to allow it."
    )
    assert len(server.received) == 1


def test_a_bare_host_allows_ports_80_and_443_only(server, monkeypatch):
    resolve_to(server, monkeypatch)
    with allow("hook.test"):
        assert json.loads(call("http://hook.test/hook")["body"])["host"] == "hook.test"  # port 80
        assert json.loads(call("http://hook.test:443/hook")["body"])["host"] == "hook.test:443"
        with pytest.raises(WebhookFailed, match="failed during the TLS handshake"):  # allowed; the server speaks no TLS
            call("https://hook.test/hook")
        for url in ("http://hook.test:8080/hook", "https://hook.test:8443/hook", "http://hook.test:22/"):
            with pytest.raises(
                WebhookRefused, match=r"Add 'hook.test:\d+' \(a host without a port allows ports 80 and 443 only\)"
            ):
                call(url)
    assert len(server.received) == 2


@pytest.mark.parametrize("entry", ["[::1]:{port}", "[0:0::1]:{port}", "::1"])
def test_an_ipv6_entry(server, monkeypatch, entry):
    resolve_to(server, monkeypatch)
    port = server.server_address[1] if "{port}" in entry else 80
    with allow(entry.format(port=port)):
        assert json.loads(call(f"http://[::1]:{port}/hook")["body"])["host"] == (
            "[::1]" if port == 80 else f"[::1]:{port}"
        )
    with allow(entry.format(port=port)), pytest.raises(WebhookRefused, match=r"Add '\[::1\]:81'"):
        call("http://[::1]:81/hook")


def test_an_entry_the_checks_refuse_allows_nothing(server):
    with allow(f"127.0.0.1:{server.server_address[1]}:1", "127.0.0.1 "), pytest.raises(WebhookRefused):
        call(f"{server.url}/hook")


# -- redirects are the result ---------------------------------------------------------


@pytest.mark.parametrize(
    "path, location", [("/redirect-ftp", "ftp://127.0.0.1:21/pub/file"), ("/redirect-secret", "/secret")]
)
def test_a_redirect_is_not_followed(server, path, location):
    with allow(server.listed):
        result = call(f"{server.url}{path}", method="GET")
    assert result["status"] == 302 and result["location"] == location
    assert [p for _, p, _ in server.received] == [path]  # nothing else was asked for


# -- time-out and body cap ---------------------------------------------------------------


def test_the_body_kept_is_capped(server):
    with allow(server.listed, WEBHOOK_MAX_BODY=1000):
        result = call(f"{server.url}/big", method="GET")
    assert result["body"] == "x" * 1000 and result["truncated"] is True
    with allow(server.listed):  # the default: 64 KiB
        assert len(call(f"{server.url}/big", method="GET")["body"]) == 64 * 1024


def test_a_body_with_nul_and_invalid_utf8_is_kept_storable(server):
    with allow(server.listed):
        assert call(f"{server.url}/nul", method="GET")["body"] == "a\ufffdb\ufffd"


@pytest.mark.parametrize("path, stage", [("/slow", "the status line"), ("/drip", "the body")])
def test_one_deadline_for_the_whole_exchange(server, path, stage):
    # The peer never finishes (a byte every 50 ms on /drip): only the exchange's own deadline ends it.
    with allow(server.listed, WEBHOOK_TIMEOUT=0.5), pytest.raises(WebhookTimeout) as info:
        call(f"{server.url}{path}", method="GET")
    assert str(info.value) == f"GET {server.url}{path} did not answer within 0.5 s (gave up while reading {stage})."


def test_a_job_may_shorten_the_timeout_but_not_lengthen_it(server):
    with allow(server.listed, WEBHOOK_TIMEOUT=0.5):
        with pytest.raises(TimeoutError, match="within 0.5 s"):
            call(f"{server.url}/slow", method="GET", timeout=3600)
        with pytest.raises(WebhookRefused, match="timeout must be"):
            call(f"{server.url}/hook", timeout=float("nan"))


# -- refusals send nothing ------------------------------------------------------------------

PRIVATE = [
    ("http://127.0.0.1:{port}/secret", "loopback"),
    ("http://[::1]:{port}/secret", "loopback"),
    ("http://localhost:{port}/secret", "loopback"),  # a name resolving to loopback
    ("http://2130706433:{port}/secret", "loopback"),  # 127.0.0.1 as one number
    ("http://0x7f.1:{port}/secret", "loopback"),
    ("http://[::ffff:127.0.0.1]:{port}/secret", "loopback (IPv4 inside IPv6)"),
    ("http://[64:ff9b::7f00:1]:{port}/secret", "loopback (IPv4 inside IPv6)"),
    ("http://[2002:7f00:1::1]:{port}/secret", "loopback (IPv4 inside IPv6)"),
    ("http://0.0.0.0:{port}/secret", "unspecified"),
    ("http://[::]:{port}/secret", "unspecified"),
    ("http://10.1.2.3/", "private"),
    ("http://172.16.0.1/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://[fc00::1]/", "private"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://224.0.0.1/", "multicast"),
    ("http://[ff02::1]/", "multicast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://100.64.0.1/", "not globally reachable"),
]


@pytest.mark.parametrize("url, reason", PRIVATE)
def test_private_addresses_are_refused_without_sending_anything(server, url, reason):
    url = url.format(port=server.server_address[1])
    with pytest.raises(WebhookRefused, match=rf"is a {reason.replace('(', '.').replace(')', '.')} address") as info:
        call(url)
    assert "WEBHOOK_ALLOWED_HOSTS" in str(info.value)
    assert server.received == []


def test_the_allow_list_names_hosts_not_addresses_they_resolve_to(server):
    with allow(server.listed), pytest.raises(WebhookRefused, match="resolves to 127.0.0.1"):
        call(f"http://localhost:{server.server_address[1]}/secret")
    assert server.received == []


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"method": "TRACE"}, "The method must be one of GET, POST, PUT, PATCH, DELETE."),
        ({"method": "CONNECT"}, "The method must be one of"),
        ({"method": "GET\r\nX: y"}, "The method must be one of"),
        ({"method": None}, "The method must be one of"),
        ({"headers": {"Host": "internal.example"}}, "The header 'Host' may not be set by a job"),
        ({"headers": {"host": "internal.example"}}, "The header 'host' may not be set"),
        ({"headers": {"Content-Length": "0"}}, "may not be set"),
        ({"headers": {"Transfer-Encoding": "chunked"}}, "may not be set"),
        ({"headers": {"Connection": "close"}}, "may not be set"),
        ({"headers": {"Proxy-Authorization": "Basic x"}}, "may not be set"),
        ({"headers": {"Upgrade": "h2c"}}, "may not be set"),
        ({"headers": {"X-A": "1\r\nHost: evil"}}, "must be text without line breaks"),
        ({"headers": {"X-A": "1\x01"}}, "must be text without line breaks or other control characters"),
        ({"headers": {"X-A": "1", "x-a": "2"}}, "names a header twice"),
        ({"headers": {"X A": "1"}}, "Header names must be"),
        ({"headers": ["Host: x"]}, "headers must be a JSON object"),
    ],
)
def test_forbidden_methods_and_headers_are_refused_without_sending_anything(server, kwargs, message):
    with allow(server.listed), pytest.raises(WebhookRefused, match=message.replace("(", r"\(")):
        call(f"{server.url}/hook", **kwargs)
    assert server.received == []


@pytest.mark.parametrize(
    "url, message",
    [
        ("file:///etc/passwd", "Only http and https"),
        ("ftp://127.0.0.1/", "Only http and https"),
        ("gopher://127.0.0.1:70/", "Only http and https"),
        ("http://user:pw@127.0.0.1/", "Credentials in the URL"),
        ("http:///path", "no host"),
        ("http://127.0.0.1:99999/", "port"),
        ("http://127.0.0.1:0/", "port is not a number from 1 to 65535"),
        ("http://127.0.0.1/a b", "ASCII text without spaces"),
        ("http://127.0.0.1/\r\nHost: x", "ASCII text without spaces"),
        ("http://bücher.example/", "ASCII text"),
        (None, "ASCII text"),
    ],
)
def test_malformed_urls_are_refused(url, message):
    with allow("127.0.0.1"), pytest.raises(WebhookRefused, match=message):
        call(url)


# -- one lookup, and the connection goes to the address checked -------------------------------


def test_the_checked_address_is_the_one_connected_to(server, monkeypatch):
    answers = iter(["127.0.0.1", "10.9.9.9"])  # a rebinding resolver: the second answer differs
    lookups = []

    def resolve(host, port, *args, **kwargs):
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    monkeypatch.setattr(webhooks.wire.socket, "getaddrinfo", resolve)
    with allow(f"hook.test:{server.server_address[1]}"):
        result = call(f"http://hook.test:{server.server_address[1]}/hook")
    assert lookups == ["hook.test"]
    assert json.loads(result["body"])["host"] == f"hook.test:{server.server_address[1]}"


@pytest.mark.parametrize("url, port", [("https://rebind.test/hook", 443), ("http://rebind.test:8080/hook", 8080)])
def test_a_public_answer_is_connected_to_as_checked(monkeypatch, url, port):
    """A public address needs no allow-list entry, on any port."""
    answers = iter(["93.184.216.34", "127.0.0.1"])
    connected = []

    def resolve(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    def connect(address, host, tls, deadline):
        connected.append(address[4])
        raise ConnectionRefusedError(111, "offline test")

    monkeypatch.setattr(webhooks.wire.socket, "getaddrinfo", resolve)
    monkeypatch.setattr(webhooks.wire, "connect", connect)
    with pytest.raises(WebhookFailed, match=r"rebind.test.* failed while connecting: offline test\.$"):
        call(url)
    assert connected == [("93.184.216.34", port)]


def test_a_name_with_any_private_address_is_refused(monkeypatch):
    def resolve(host, port, *args, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.1", port)),
        ]

    monkeypatch.setattr(webhooks.wire.socket, "getaddrinfo", resolve)
    with pytest.raises(WebhookRefused, match="resolves to 10.0.0.1"):
        call("http://mixed.test/")
