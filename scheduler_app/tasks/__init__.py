"""Built-in tasks: run an allowed management command, send an email, call a webhook.

Each is reachable by anyone who may create a job, so each refuses what a job
must not do (invariant 12, docs/ARCHITECTURE.md): commands outside RUN_COMMAND_ALLOWED, a
From address outside EMAIL_FROM_ALLOWED, a webhook to a private address.
"""

import io
from email.utils import parseaddr

from django.conf import settings
from django.core import mail, management
from django.core.exceptions import ValidationError
from django.tasks import task

from .. import conf
from ..registry import shown
from ..validation import options as task_options
from . import webhooks


def command_refusal(name):
    """Return why ``run_command`` may not run command ``name``, or None."""
    allowed = conf.get("RUN_COMMAND_ALLOWED")
    if isinstance(name, str) and name in allowed:
        return None
    return (
        f"Command {shown(name)} is not allowed: run_command runs only the commands "
        f'SCHEDULER["RUN_COMMAND_ALLOWED"] lists ({", ".join(allowed) or "none"}).'
    )


def _allowed_command(args, kwargs):
    """Refuse a run_command job whose command is not allowed, when the job is made."""
    field, name = ("args", args[0]) if args else ("kwargs", kwargs.get("name"))
    problem = command_refusal(name)
    if problem:
        raise ValidationError({field: [problem]})


@task_options.options(validate=_allowed_command)
@task
def run_command(name, *args, **options):
    """Run a management command from the SCHEDULER["RUN_COMMAND_ALLOWED"] list; return its output."""
    # Again at run time: the setting may have changed since the job was made.
    problem = command_refusal(name)
    if problem:
        raise PermissionError(problem)
    out = io.StringIO()
    management.call_command(name, *[str(a) for a in args], stdout=out, stderr=out, **options)
    return out.getvalue()[-10000:]


def _address(value):
    return parseaddr(value)[1].lower() if isinstance(value, str) else None


@task
def send_email(to, subject, body, from_email=None, html=None):
    """Send one email to a recipient or a list of recipients; return how many were sent.

    It comes from DEFAULT_FROM_EMAIL; a job may name another From address
    only if SCHEDULER["EMAIL_FROM_ALLOWED"] lists it.
    """
    if from_email is not None:
        allowed = {_address(a) for a in conf.get("EMAIL_FROM_ALLOWED")} | {_address(settings.DEFAULT_FROM_EMAIL)}
        if not _address(from_email) or _address(from_email) not in allowed:
            raise PermissionError(
                f"The From address {shown(from_email)} is not allowed: a job may name one only if "
                "SCHEDULER['EMAIL_FROM_ALLOWED'] lists it. Leave from_email out to send from DEFAULT_FROM_EMAIL."
            )
    recipients = [to] if isinstance(to, str) else list(to)
    return mail.send_mail(subject, body, from_email, recipients, html_message=html, fail_silently=False)


@task
def call_webhook(url, method="POST", payload=None, headers=None, timeout=None):
    """Send an HTTP request with a JSON body; return its status and body.

    Public addresses only, unless SCHEDULER["WEBHOOK_ALLOWED_HOSTS"] names
    the host for the port ("host": 80 and 443; "host:port"); GET, POST, PUT,
    PATCH or DELETE; no Host or hop-by-hop headers; redirects are not
    followed (a 3xx is the result); fails on 4xx and 5xx and on a malformed
    answer. One deadline for the whole exchange: ``timeout`` may shorten
    SCHEDULER["WEBHOOK_TIMEOUT"], not lengthen it. See ``scheduler_app/tasks/webhooks.py``.
    """
    return webhooks.call(url, method=method, payload=payload, headers=headers, timeout=timeout)
