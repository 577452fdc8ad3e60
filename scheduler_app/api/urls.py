from django.urls import path  # noqa: F401  (the REST API is added by the API issue)

urlpatterns = []
