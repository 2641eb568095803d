"""Cross-cutting parts of the REST API: one error body for every failure (a service's refusal answered as its class
declares) and request bodies the database can store. The owner-or-maintainer rule is `benchmarks.permissions`."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, JsonResponse
from django.urls import resolve
from kombu.exceptions import OperationalError as KombuOperationalError
from rest_framework import exceptions, pagination, parsers, status
from rest_framework.response import Response

from common.errors import ApplicationError


class PageNumberPagination(pagination.PageNumberPagination):
    """DRF's page-number pages, saying how many items a page holds (`page_size`), so a client can tell a short last
    page from a smaller page size."""

    def get_paginated_response(self, data):
        response = super().get_paginated_response(data)
        # The request is set by paginate_queryset, which runs first; without one the page size is the default.
        response.data["page_size"] = self.get_page_size(self.request) if self.request is not None else self.page_size
        return response

    def get_paginated_response_schema(self, schema):
        described = super().get_paginated_response_schema(schema)
        described["properties"]["page_size"] = {
            "type": "integer",
            "example": 50,
            "description": "How many items a page holds.",
        }
        return described


def _nul_at(value, where: str = "body") -> str | None:
    """Where a NUL character hides in parsed request data (keys included), or None."""
    if isinstance(value, str):
        return where if "\x00" in value else None
    if isinstance(value, dict) or hasattr(value, "lists"):
        items = (
            ((k, v[0] if len(v) == 1 else v) for k, v in value.lists()) if hasattr(value, "lists") else value.items()
        )  # a form's QueryDict: a list per field
        for key, item in items:
            if "\x00" in str(key):
                return f"{where}: a key"
            if found := _nul_at(item, f"{where}.{key}"):
                return found
    if isinstance(value, list):
        return next((found for index, item in enumerate(value) if (found := _nul_at(item, f"{where}[{index}]"))), None)
    return None


class _NoNul(parsers.BaseParser):
    """PostgreSQL stores no NUL character (in text or jsonb): refuse it while parsing, saying where, instead of
    failing at the database."""

    def parse(self, stream, media_type=None, parser_context=None):
        parsed = super().parse(stream, media_type, parser_context)
        if where := _nul_at(getattr(parsed, "data", parsed)):
            raise exceptions.ParseError(f"{where} contains a NUL character (\\u0000), which text may not hold")
        return parsed


class JSONParser(_NoNul, parsers.JSONParser):
    pass


class FormParser(_NoNul, parsers.FormParser):
    pass


class MultiPartParser(_NoNul, parsers.MultiPartParser):
    pass


# Seconds a client is told to wait when the broker is down: about what a broker restart takes.
BROKER_RETRY_AFTER = 30


def error_body(*, code: str, message: str, details=None) -> dict:
    return {"error": {"code": code, "message": message, "details": details}}


def exception_handler(exc, context):
    """DRF's handler, reshaped to {"error": {code, message, details}}; a service's refusal (ApplicationError) is
    answered with the status and code its class declares."""
    from rest_framework.views import exception_handler as drf_exception_handler  # here: DRF's views import this module

    if isinstance(exc, KombuOperationalError):  # what needed the broker was not done; nothing else is lost
        return Response(
            error_body(
                code="broker_unavailable",
                message=(
                    "the task queue (broker) does not answer, so this could not be queued; try again "
                    f"in {BROKER_RETRY_AFTER} s"
                ),
            ),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(BROKER_RETRY_AFTER)},
        )
    if isinstance(exc, ApplicationError):
        return Response(
            error_body(code=exc.code, message=exc.summary or str(exc), details=exc.details), status=exc.status
        )
    if isinstance(exc, DjangoValidationError):
        messages = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        return Response(
            error_body(code="invalid", message="the request is not valid", details=messages),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        body = error_body(code="invalid", message="the request is not valid", details=response.data)
    else:
        detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
        code = detail.code if hasattr(detail, "code") else "error"
        # Throttled sets `wait` in __init__; the DRF stubs do not declare it.
        details = {"wait": exc.wait} if isinstance(exc, exceptions.Throttled) else None  # type: ignore[attr-defined]
        body = error_body(code=code, message=str(detail), details=details)
    response.data = body
    return response


def api_not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    """Unknown addresses under /api/v1/ answer with the same error body as everything else."""
    message = f"no endpoint at {request.path}"
    # The catch-all route stops Django's redirect to the address with a slash: say it instead.
    if not request.path.endswith("/") and resolve(request.path + "/").func is not api_not_found:
        message += f"; did you mean {request.path}/ ?"
    return JsonResponse(error_body(code="not_found", message=message), status=404)
