"""URL routes of the platform."""

from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from config.auth import PasswordResetLimitedView
from config.guides import guide, guide_example, guide_index
from config.health import healthz
from config.release_addresses import release_alias
from evaluation.views_tokens import api_tokens

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("guides/submitting/example.zip", guide_example, name="guide-example"),
    path("guides/", guide_index, name="guide-index"),
    path("guides/<slug:slug>/", guide, name="guide"),
    path("accounts/tokens/", api_tokens, name="api-tokens"),
    path("accounts/password_reset/", PasswordResetLimitedView.as_view(), name="password_reset"),
    path("accounts/", include("django.contrib.auth.urls")),
    # The guides' short address of the API docs (the versioned one is where they live).
    path("api/docs/", RedirectView.as_view(pattern_name="api-docs", query_string=True), name="api-docs-short"),
    path("api/v1/", include("config.api_urls")),
    path("", include("submissions.urls")),
    path("", include("evaluation.urls")),
    path("", include("agents.urls")),
    path("", include("leaderboard.urls")),
    path("", include("humans.urls")),
    path("", include("benchmarks.urls")),
    # The release pages' other prefix and the prefixes alone: permanent redirects (config/release_addresses.py).
    re_path(r"^releases/(?P<rest>.*)$", release_alias, name="release-alias"),
    path("versions/", RedirectView.as_view(pattern_name="home", permanent=True), name="versions-index"),
]
