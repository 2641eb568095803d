"""Limits on guessing and flooding the account pages: django-axes locks sign-in per account and per client address
after repeated failures; sign-up and password reset are rate-limited per address and per account (django-ratelimit,
counted in the cache)."""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.contrib.auth.views import PasswordResetView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from common.ratelimit import rate_limited, rate_limited_response


def client_ip(request: HttpRequest) -> str:
    """The client's address: behind the TLS proxy, the last X-Forwarded-For hop (the one the proxy itself added;
    earlier ones are the client's to invent), else the connection's own address."""
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "") if settings.BEHIND_TLS_PROXY else ""
    return forwarded.split(",")[-1].strip() or request.META.get("REMOTE_ADDR", "")


class LoginLimitBackend(AxesStandaloneBackend):
    """Axes' lockout for every sign-in made by a web request; `authenticate()` without a request (management
    commands, scripts on the server) has no client to limit, so it goes on to the next backend."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)


def lockout_response(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """What a locked-out sign-in sees (axes' AXES_LOCKOUT_CALLABLE): a page saying so and for how long."""
    minutes = max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
    return render(request, "registration/locked_out.html", {"minutes": minutes}, status=429)


class PasswordResetLimitedView(PasswordResetView):
    """Django's password reset, refusing floods of reset mails to one address or from one client."""

    def post(self, request, *args, **kwargs):
        if rate_limited(
            request, action="password-reset", rate=settings.PASSWORD_RESET_RATE, account=request.POST.get("email", "")
        ):
            return rate_limited_response(request, what="password reset requests")
        return super().post(request, *args, **kwargs)
