"""The request a view gets when it asks whether htmx sent it: django-htmx's middleware sets `request.htmx`."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """An `HttpRequest` as HtmxMiddleware (settings.MIDDLEWARE) hands it to every view; for annotations only."""

    htmx: HtmxDetails
