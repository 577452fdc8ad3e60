"""Built-in tasks: run an allowed management command, send an email, call a webhook."""

import io
import json
import urllib.error
import urllib.parse
import urllib.request

from django.core import mail, management
from django.tasks import task

from . import conf


@task
def run_command(name, *args, **options):
    """Run a management command from the SCHEDULER["ALLOWED_COMMANDS"] list; return its output."""
    allowed = conf.get("ALLOWED_COMMANDS")
    if name not in allowed:
        raise PermissionError(
            f"Command {name!r} is not allowed; allowed: {', '.join(allowed) or 'none'}."
        )
    out = io.StringIO()
    management.call_command(name, *[str(a) for a in args], stdout=out, stderr=out, **options)
    return out.getvalue()[-10000:]


@task
def send_email(to, subject, body, from_email=None, html=None):
    """Send one email to a recipient or a list of recipients; return how many were sent."""
    recipients = [to] if isinstance(to, str) else list(to)
    return mail.send_mail(
        subject, body, from_email, recipients, html_message=html, fail_silently=False
    )


@task
def call_webhook(url, method="POST", payload=None, headers=None, timeout=10.0):
    """Send an HTTP request (JSON body); fail on a non-2xx answer; return status and body."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https"):
        raise ValueError(f"Only http and https URLs are allowed, not {scheme!r}.")
    data = None
    all_headers = {"User-Agent": "scheduler-app-webhook/1.0", **(headers or {})}
    if payload is not None:
        data = json.dumps(payload).encode()
        all_headers.setdefault("Content-Type", "application/json")
    request = urllib.request.Request(url, data=data, method=method.upper(), headers=all_headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read(65536).decode("utf-8", "replace")
        return {"status": response.status, "body": body}
