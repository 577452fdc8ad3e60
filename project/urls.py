from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    # Browsers ask for /favicon.ico on pages that name no icon (the API's JSON, the admin's do name it).
    path("favicon.ico", RedirectView.as_view(url=static("scheduler_app/img/favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
    path("", include("scheduler_app.urls")),
]
