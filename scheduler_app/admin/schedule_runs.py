"""The schedule page's coming runs: the next five, and a small JSON endpoint that the form asks as a cron expression is typed.

``GET <admin>/scheduler_app/schedule/next-runs/?cron=...&timezone=...`` (or
``?interval_seconds=...``) answers ``{"runs": [ISO UTC...], "shown": [...]}``
or ``{"error": "..."}`` (400) by the schedules' own rules
(``validation.schedules``), for a user who may view, change or add
schedules (else 403). The page's few lines of inline script call it.
"""

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import JsonResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from .. import schedules
from ..validation.errors import error_text
from ..validation.schedules import CRON, INTERVAL, TIMEZONE
from ..vocabulary.bounds import NEXT_RUNS_SHOWN
from .formatting import exact_time

# Asks the endpoint as the timetable's boxes change; shows its answer in the list.
SCRIPT = """<script>(function () {
  const list = document.getElementById("coming-runs"), url = list.dataset.url;
  const box = (name) => document.getElementById("id_" + name);
  let timer = null;
  function ask() {
    const query = new URLSearchParams();
    for (const name of ["cron", "interval_seconds", "timezone"]) { if (box(name)) query.set(name, box(name).value); }
    fetch(url + "?" + query, {credentials: "same-origin"}).then((r) => r.json()).then((body) => {
      list.replaceChildren(...(body.error ? [body.error] : body.shown).map((text) => {
        const item = document.createElement("li"); item.textContent = text; return item; }));
      list.classList.toggle("errornote", Boolean(body.error));
    }).catch(() => {});
  }
  for (const name of ["cron", "interval_seconds", "timezone"]) {
    if (box(name)) box(name).addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(ask, 250); });
    if (box(name)) box(name).addEventListener("change", ask);
  }
})();</script>"""


def timing(query):
    """Return a schedule's timing fields from the endpoint's query; raise ValidationError by field."""
    cron = (query.get("cron") or "").strip()
    interval = (query.get("interval_seconds") or "").strip()
    if cron and interval:
        raise ValidationError({"cron": ["Give either a cron expression or an interval, not both."]})
    if not cron and not interval:
        raise ValidationError({"cron": ["Give a cron expression or an interval in seconds."]})
    if cron:
        return {"cron": CRON.check(cron), "timezone": TIMEZONE.check(query.get("timezone") or "UTC")}
    return {"interval_seconds": INTERVAL.parse(interval)}


class ComingRunsMixin:
    """The "coming runs" field of the schedule page, and the endpoint its script asks."""

    def get_urls(self):
        view = self.admin_site.admin_view(self.coming_runs_view)
        return [path("next-runs/", view, name="scheduler_app_schedule_next_runs"), *super().get_urls()]

    def coming_runs_view(self, request):
        if not (self.has_view_or_change_permission(request) or self.has_add_permission(request)):
            return JsonResponse({"error": "You may not view schedules."}, status=403)
        try:
            fields = timing(request.GET)
        except ValidationError as exc:
            return JsonResponse({"error": error_text(exc)}, status=400)
        runs = schedules.coming_runs(fields, NEXT_RUNS_SHOWN, timezone.now())
        return JsonResponse(
            {
                "runs": [run.isoformat().replace("+00:00", "Z") for run in runs],
                "shown": [exact_time(run) for run in runs] or ["No run to come."],
            }
        )

    @admin.display(description=f"next {NEXT_RUNS_SHOWN} runs")
    def coming_runs(self, obj):
        runs = schedules.coming_runs(obj, NEXT_RUNS_SHOWN, timezone.now()) if obj is not None and obj.pk else []
        items = format_html_join("", "<li>{}</li>", ((exact_time(run),) for run in runs))
        url = reverse("admin:scheduler_app_schedule_next_runs")
        listed = format_html('<ol id="coming-runs" data-url="{}">{}</ol>', url, items or mark_safe("<li>–</li>"))
        return listed + mark_safe(SCRIPT)
