"""The scheduler's URLs, for a project's URLconf: ``path("scheduler/", include("scheduler_app.urls"))``.

- ``api/``: the REST API (its root lists the endpoints; ``api/docs/`` is Swagger UI);
- ``metrics``: Prometheus' text format (``scheduler_app.observability.metrics``).

The admin pages (the models and the dashboard) come with the project's admin
site, not from here.
"""

from django.urls import include, path

from .observability.metrics import metrics_view

urlpatterns = [path("api/", include("scheduler_app.api.urls")), path("metrics", metrics_view, name="scheduler-metrics")]
