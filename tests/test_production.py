"""Production settings pass Django's deployment checks; /healthz reports database, broker and storage."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "k" * 30 + "-a-long-random-production-secret-value-1234",
    "FIELD_ENCRYPTION_KEY": "f" * 20 + "-a-key-of-its-own-for-model-api-keys",
    "ALLOWED_HOSTS": "bench.example.org",
    "LOG_FORMAT": "json",
}


def _manage_check(env: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env={**env, "VAR_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _env_example() -> dict[str, str]:
    lines = (REPO / ".env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_production_refuses_to_start_with_the_placeholders_of_env_example(tmp_path):
    compose_urls = {
        "DATABASE_URL": "postgres://rcb:change-me@postgres:5432/rcb",
        "REDIS_URL": "redis://:change-me@redis:6379/0",
    }  # as docker-compose.yml builds them
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    proc = _manage_check({**base, **_env_example(), **compose_urls}, tmp_path)
    assert proc.returncode != 0
    for name in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY", "MAINTAINER_PASSWORD", "POSTGRES_PASSWORD", "REDIS_PASSWORD"):
        assert f"- {name} is still the placeholder of .env.example" in proc.stderr, (name, proc.stderr[-2000:])
    for name in ("DATABASE_URL", "REDIS_URL"):
        assert f"- the password in {name} is still the placeholder" in proc.stderr, proc.stderr[-2000:]
    assert "change-me@" not in proc.stderr, "a URL's password is named, never printed"


@pytest.mark.parametrize(
    ("field_key", "message"),
    [
        ("", "FIELD_ENCRYPTION_KEY is required in production (a secret of its own, not SECRET_KEY)"),
        (PRODUCTION["SECRET_KEY"], "FIELD_ENCRYPTION_KEY must differ from SECRET_KEY"),
        ("short-key", "FIELD_ENCRYPTION_KEY is 9 characters; use at least 32"),
    ],
)
def test_production_requires_a_field_encryption_key_of_its_own(tmp_path, field_key, message):
    proc = _manage_check({**os.environ, **PRODUCTION, "FIELD_ENCRYPTION_KEY": field_key}, tmp_path)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]


def test_development_defaults_need_no_secrets(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY", "DEBUG")}
    proc = _manage_check(env, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.django_db
def test_keys_stored_under_the_secret_key_derivation_move_to_the_field_key(settings):
    from django.core.management import call_command

    from evaluation.models import ModelEntry

    settings.FIELD_ENCRYPTION_KEY, settings.FIELD_ENCRYPTION_KEY_FALLBACKS = "", []  # as sites ran before
    model = ModelEntry.objects.create(name="legacy", display_name="Legacy", litellm_model="openai/l")
    model.api_key_set("sk-legacy")
    model.save()
    assert model.api_key_get() == "sk-legacy"  # development default: derived from SECRET_KEY, as before

    settings.FIELD_ENCRYPTION_KEY = "a-new-field-key-of-its-own-0123456789"
    with pytest.raises(ValueError, match="FIELD_ENCRYPTION_KEY_FALLBACKS"):
        ModelEntry.objects.get(name="legacy").api_key_get()
    settings.FIELD_ENCRYPTION_KEY_FALLBACKS = [settings.SECRET_KEY]
    assert ModelEntry.objects.get(name="legacy").api_key_get() == "sk-legacy"
    call_command("model_keys_reencrypt")
    settings.FIELD_ENCRYPTION_KEY_FALLBACKS = []
    assert ModelEntry.objects.get(name="legacy").api_key_get() == "sk-legacy", "readable by the new key alone"


def test_check_deploy_reports_nothing_with_the_production_environment(tmp_path):
    env = {**os.environ, **PRODUCTION, "VAR_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
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
    client, media_root, maintainer, author, caplog
):
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
    assert any(
        "broker failed" in record.getMessage() and "127.0.0.1:1" in record.getMessage() for record in caplog.records
    ), "the reason is in the log"
