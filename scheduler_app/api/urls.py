"""Routes of the REST API, mounted under /api/ by project/urls.py."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from . import schedules, views

app_name = "api"

router = SimpleRouter()
router.register("jobs", views.JobViewSet, basename="job")
router.register("tasks", views.TaskViewSet, basename="task")
router.register("workers", views.WorkerViewSet, basename="worker")
router.register("queues", views.QueueViewSet, basename="queue")
router.register("schedules", schedules.ScheduleViewSet, basename="schedule")

urlpatterns = [
    *router.urls,
    path("stats/", views.StatsView.as_view(), name="stats"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
]
