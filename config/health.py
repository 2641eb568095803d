"""/healthz: does this web process reach its database, broker and storage? Answers within a few seconds."""

from __future__ import annotations

import time
import uuid

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection
from django.http import HttpRequest, JsonResponse

TIMEOUT = 2.0


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("select 1")


def _broker() -> None:
    from config.celery import app

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=TIMEOUT)


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
    checks, healthy = {}, True
    for name, check in (("database", _database), ("broker", _broker), ("storage", _storage)):
        started = time.monotonic()
        try:
            check()
            checks[name] = {"ok": True, "seconds": round(time.monotonic() - started, 3)}
        except Exception as exc:  # any failure of a dependency is an unhealthy answer, not a 500
            healthy = False
            checks[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return JsonResponse({"healthy": healthy, "checks": checks}, status=200 if healthy else 503)
