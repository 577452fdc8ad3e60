"""The built-in tasks: run an allowed command, send an email, call a webhook."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core import mail
from django.test import override_settings

from scheduler_app import tasks


@pytest.mark.django_db
def test_run_command_runs_only_allowed_commands():
    output = tasks.run_command.call("purgejobs", "--dry-run")
    assert "would be deleted" in output
    with pytest.raises(PermissionError, match="not allowed"):
        tasks.run_command.call("flush", "--no-input")


@override_settings(
    MAILERS={"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
)
def test_send_email():
    assert tasks.send_email.call(["a@example.com", "b@example.com"], "Hello", "Body") == 1
    assert mail.outbox[-1].to == ["a@example.com", "b@example.com"]
    assert mail.outbox[-1].subject == "Hello"


class _Handler(BaseHTTPRequestHandler):
    received = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, self.headers["Content-Type"], json.loads(body)))
        status = 500 if self.path == "/fail" else 200
        self.send_response(status)
        self.end_headers()
        self.wfile.write(b'{"ok": true}')

    def log_message(self, *args):
        """Keep the test output free of the server's request lines."""


@pytest.fixture
def webhook_server():
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_call_webhook_posts_json_and_fails_on_errors(webhook_server):
    result = tasks.call_webhook.call(f"{webhook_server}/hook", payload={"event": "done"})
    assert result == {"status": 200, "body": '{"ok": true}'}
    assert _Handler.received[-1] == ("/hook", "application/json", {"event": "done"})
    from urllib.error import HTTPError

    with pytest.raises(HTTPError):
        tasks.call_webhook.call(f"{webhook_server}/fail", payload={})
    with pytest.raises(ValueError, match="Only http and https"):
        tasks.call_webhook.call("file:///etc/passwd")
