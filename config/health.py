"""/healthz: does this web process reach its database, broker and storage? Answers within a few seconds.

The public (load balancers, anyone) learns only healthy or not; which dependency failed and why (host names,
error texts) is for maintainers and the log.
"""

from __future__ import annotations

import logging
import math
import time
import uuid

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection
from django.http import HttpRequest, JsonResponse

from benchmarks.selectors import user_is_maintainer

TIMEOUT = 2.0
logger = logging.getLogger(__name__)


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("select 1")


def _broker() -> None:
    from config.celery import app

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=math.ceil(TIMEOUT))  # kombu takes whole seconds


def _storage() -> None:
    # A name of its own per probe: on S3 a save overwrites, and concurrent probes would delete each other's.
    name = default_storage.save(f"healthz/probe-{uuid.uuid4().hex}", ContentFile(b"ok"))
    try:
        with default_storage.open(name) as handle:
            if handle.read() != b"ok":
                raise OSError("storage returned other bytes than were written")
    finally:
        default_storage.delete(name)


def healthz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, dict[str, object]] = {}
    healthy = True
    for name, check in (("database", _database), ("broker", _broker), ("storage", _storage)):
        started = time.monotonic()
        try:
            check()
            checks[name] = {"ok": True, "seconds": round(time.monotonic() - started, 3)}
        except Exception as exc:  # any failure of a dependency is an unhealthy answer, not a 500
            healthy = False
            checks[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
            logger.warning("healthz: %s failed: %s", name, checks[name]["error"])
    body: dict = {"healthy": healthy}
    if user_is_maintainer(user=request.user):
        body["checks"] = checks
    return JsonResponse(body, status=200 if healthy else 503)
