"""A service's refusal (ApplicationError) on a page, caught in one place: `ApplicationErrorMiddleware`.

A view that acts on a POST and goes back to a page declares where with `@refusal_redirect(...)`: a refusal is then
that page with the refusal as an error message, as a success is with its own message. Any other view's refusal is a
page saying it, with the status its class declares. A form that shows the refusal inline, beside the fields, catches
it itself (the form has to be rendered again).
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from common.errors import ApplicationError

# The view's URL arguments (and the request) -> the address a refused POST goes back to.
RefusalTarget = Callable[..., str]


def refusal_redirect(target: RefusalTarget):
    """Declare where a refused action of this view goes back to (`target(request, **url_arguments)`); put it
    outermost, so that the view the URL resolves to carries it."""

    def decorate(view):
        view.refusal_redirect = target
        return view

    return decorate


class ApplicationErrorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, ApplicationError):
            return None
        match = request.resolver_match
        target = getattr(match.func, "refusal_redirect", None) if match else None
        if match is None or target is None:
            return render(request, "refused.html", {"message": str(exception)}, status=exception.status)
        messages.error(request, str(exception))
        return redirect(target(request, *match.args, **match.kwargs))
