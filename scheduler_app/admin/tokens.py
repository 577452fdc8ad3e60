"""A staff user's own API token, from the admin: see whether one exists, make one (or a new one).

Only staff (the admin site's own check) and only their own token: no model
permission is needed, as a password change needs none. The key is shown
once, in the answer to the POST that made it; afterwards only its first
characters. Needs ``rest_framework.authtoken`` in INSTALLED_APPS (the API's
tokens); without it the page says so.
"""

from django.apps import apps
from django.contrib import messages
from django.db import transaction
from django.template.response import TemplateResponse
from django.urls import reverse

SHOWN_CHARS = 4


def token_view(model_admin, request):
    """GET: the user's token (its start) and a button; POST: a new token, shown once."""
    installed = apps.is_installed("rest_framework.authtoken")
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "My API token",
        "subtitle": None,
        "installed": installed,
        "api_url": _api_root(),
    }
    if installed:
        from rest_framework.authtoken.models import Token

        if request.method == "POST":
            with transaction.atomic():
                Token.objects.filter(user=request.user).delete()
                context["new_key"] = Token.objects.create(user=request.user).key
            messages.success(request, "A new token was made; any token you had before no longer works.")
        existing = Token.objects.filter(user=request.user).values_list("key", "created").first()
        if existing:
            context["token_start"] = existing[0][:SHOWN_CHARS]
            context["token_created"] = existing[1]
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/scheduler_app/token.html", context)


def _api_root():
    try:
        return reverse("scheduler_api:root")
    except Exception:  # noqa: BLE001 - a project that mounts the API under another name: the docs say where
        return None
