"""URL routes of the platform."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include("config.api_urls")),
    path("", include("submissions.urls")),
    path("", include("evaluation.urls")),
    path("", include("benchmarks.urls")),
]
