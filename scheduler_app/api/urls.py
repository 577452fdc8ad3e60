"""Routes of the REST API, mounted under /api/ by project/urls.py.

The last route takes every other path under /api/, so that it too answers
in JSON (404) rather than with Django's HTML page.
"""

from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from . import audit, observability, root, schedules, views, workflows

app_name = "scheduler_api"

router = SimpleRouter()
router.register("jobs", views.JobViewSet, basename="job")
router.register("tasks", views.TaskViewSet, basename="task")
router.register("workers", views.WorkerViewSet, basename="worker")
router.register("queues", views.QueueViewSet, basename="queue")
router.register("schedules", schedules.ScheduleViewSet, basename="schedule")
router.register("workflows", workflows.WorkflowViewSet, basename="workflow")
router.register("audit", audit.AuditEventViewSet, basename="audit")


urlpatterns = [
    path("", root.APIRootView.as_view(), name="root"),
    *router.urls,
    path("stats/", views.StatsView.as_view(), name="stats"),
    path("stats/history/", observability.HistoryView.as_view(), name="history"),
    path("schema/", root.SchemaView.as_view(), name="schema"),
    path("docs/", root.DocsView.as_view(), name="docs"),
    re_path(r"^", root.NotFoundView.as_view(), name="not-found"),
]
