"""The site's own 404 and 500 pages while DEBUG is on (`make run`), where Django would show its debug pages: the 404
one lists every URL pattern of the site, and neither is what a visitor of a demo should meet. SITE_ERROR_PAGES=false
brings Django's debug pages back; the traceback of a 500 is logged either way. With DEBUG off this does nothing:
Django renders templates/404.html and 500.html itself."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import Resolver404, resolve
from django.views import defaults

logger = logging.getLogger("django.request")


class SiteErrorPagesMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    @staticmethod
    def active() -> bool:
        return settings.DEBUG and settings.SITE_ERROR_PAGES

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # An address no route matches never reaches a view (nor process_exception): Django answered with its debug
        # page, replaced here.
        if self.active() and response.status_code == 404 and not _routed(request):
            return defaults.page_not_found(request, Resolver404({"path": request.path_info}))
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not self.active():
            return None
        if isinstance(exception, Http404):
            return defaults.page_not_found(request, exception)
        if isinstance(exception, PermissionDenied):  # a refusal, not a server error
            return defaults.permission_denied(request, exception)
        logger.error("Internal Server Error: %s", request.path, exc_info=exception, extra={"status_code": 500})
        return defaults.server_error(request)


def _routed(request: HttpRequest) -> bool:
    try:
        resolve(request.path_info)
    except Resolver404:
        return False
    return True
