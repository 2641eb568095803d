"""Production settings pass Django's deployment checks; /healthz reports database, broker and storage."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

PRODUCTION = {"DEBUG": "false", "SECRET_KEY": "k" * 30 + "-a-long-random-production-secret-value-1234",
              "ALLOWED_HOSTS": "bench.example.org", "LOG_FORMAT": "json"}


def test_check_deploy_reports_nothing_with_the_production_environment(tmp_path):
    env = {**os.environ, **PRODUCTION, "VAR_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout


def test_json_log_lines():
    from config.logs import JsonFormatter

    record = logging.LogRecord("evaluation", logging.WARNING, __file__, 1, "run %s stalled", (7,), None)
    entry = json.loads(JsonFormatter().format(record))
    assert entry["level"] == "WARNING" and entry["message"] == "run 7 stalled" and entry["logger"] == "evaluation"


@pytest.mark.django_db
def test_healthz_is_ok_when_everything_answers(client, media_root, maintainer):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"healthy": True}
    client.force_login(maintainer)
    body = client.get("/healthz").json()
    assert body["healthy"] and set(body["checks"]) == {"database", "broker", "storage"}, body


@pytest.mark.django_db
def test_healthz_is_503_when_the_broker_is_gone_and_names_it_only_to_maintainers_and_the_log(
        client, media_root, maintainer, author, caplog):
    from config.celery import app
    from tests.conftest import _pool_reset

    saved = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.broker_url, app.conf.broker_transport_options = "redis://127.0.0.1:1/0", {}
    _pool_reset(app)
    try:
        public = client.get("/healthz")
        client.force_login(author)
        signed_in = client.get("/healthz")
        client.force_login(maintainer)
        detailed = client.get("/healthz")
    finally:
        app.conf.broker_url, app.conf.broker_transport_options = saved
        _pool_reset(app)
    for response in (public, signed_in):  # neither the broker's address nor the error reaches a non-maintainer
        assert response.status_code == 503 and response.json() == {"healthy": False}
        assert b"127.0.0.1" not in response.content
    body = detailed.json()
    assert detailed.status_code == 503 and not body["healthy"]
    assert body["checks"]["broker"]["ok"] is False and body["checks"]["database"]["ok"] is True
    assert "127.0.0.1:1" in body["checks"]["broker"]["error"]
    assert any("broker failed" in record.getMessage() and "127.0.0.1:1" in record.getMessage()
               for record in caplog.records), "the reason is in the log"
