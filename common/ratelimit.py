"""Rate limiting of the account pages (sign-up, password reset): per client address and per account, counted in the
cache by django-ratelimit; the client's address is `config.auth.client_ip` (RATELIMIT_IP_META_KEY)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_ratelimit.core import is_ratelimited


def rate_limited(request: HttpRequest, *, action: str, rate: str, account: str) -> bool:
    """Count this request of `action` per client address and per account (a username or e-mail); True when either
    went over `rate` (e.g. "5/h")."""
    by_address = is_ratelimited(request, group=f"{action}:ip", key="ip", rate=rate, increment=True)
    by_account = bool(account) and is_ratelimited(
        request,
        group=f"{action}:account",
        key=lambda group, request: account.strip().lower(),
        rate=rate,
        increment=True,
    )
    return by_address or by_account


def rate_limited_response(request: HttpRequest, *, what: str) -> HttpResponse:
    return render(request, "registration/rate_limited.html", {"what": what}, status=429)
