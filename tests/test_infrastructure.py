"""The real services the platform runs on: the database CI asks for, Celery workers on Redis and on the embedded
broker, and `make run` serving the demo with no PostgreSQL or Redis."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from tests.conftest import REPO, UNDER_CI, celery_client, free_port

pytestmark = [pytest.mark.worker, pytest.mark.slow]  # real workers and a whole `make run`

SCORED = re.compile(r"Task evaluation\.tasks\.item_evaluate\[[^]]+\] succeeded")
SERVICE_VARIABLES = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a fresh machine: none of the service settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARIABLES}
    return {**env, **extra}


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen:
    celery = Path(sys.executable).with_name("celery")
    command = [str(celery), "-A", "config", "worker", "--pool", "solo", "--queues", "default", "--loglevel", "INFO"]
    return subprocess.Popen(
        command, cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )


def stop(process: subprocess.Popen) -> None:
    """SIGTERM the whole process group, then SIGKILL whatever is left (a worker slow to shut down)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.mark.django_db
def test_database_is_postgresql_when_ci_asks_for_it():
    wanted = os.environ.get("DATABASE_URL", "sqlite")
    if wanted.startswith("postgres"):
        assert connection.vendor == "postgresql"
        with connection.cursor() as cursor:
            cursor.execute("select 1")
            assert cursor.fetchone() == (1,)
    elif UNDER_CI:
        pytest.fail("CI=true runs the suite on PostgreSQL: DATABASE_URL must name it")
    else:
        assert connection.vendor == "sqlite"


def test_celery_worker_round_trip_over_redis(redis_url: str, tmp_path: Path):
    env = clean_env(CELERY_BROKER_URL=redis_url, CELERY_RESULT_BACKEND=redis_url, VAR_DIR=str(tmp_path))
    worker = start_worker(env, tmp_path / "worker.log")
    try:
        client = celery_client(broker=redis_url, backend=redis_url)
        assert client.send_task("config.ping", queue="default").get(timeout=60) == "pong"
    finally:
        stop(worker)
    assert worker.returncode == 0, (tmp_path / "worker.log").read_text()


def test_celery_worker_round_trip_over_the_embedded_filesystem_broker(tmp_path: Path):
    backend = f"file://{tmp_path / 'results'}"
    (tmp_path / "results").mkdir()
    queue = str(tmp_path / "broker" / "queue")
    os.makedirs(queue)
    worker = start_worker(clean_env(VAR_DIR=str(tmp_path), CELERY_RESULT_BACKEND=backend), tmp_path / "worker.log")
    try:
        client = celery_client(
            broker="filesystem://",
            backend=backend,
            broker_transport_options={
                "data_folder_in": queue,
                "data_folder_out": queue,
                "processed_folder": str(tmp_path / "broker" / "processed"),
                "control_folder": str(tmp_path / "broker" / "control"),
            },
        )
        assert client.send_task("config.ping", queue="default").get(timeout=60) == "pong"
    finally:
        stop(worker)


def test_make_run_serves_the_demo_without_postgres_or_redis(tmp_path: Path):
    port = free_port()
    log = tmp_path / "run.log"
    venv = Path(sys.executable).parent.parent
    process = subprocess.Popen(
        ["make", "run", f"HOST=127.0.0.1:{port}", f"VENV={venv}"],
        cwd=REPO,
        env=clean_env(VAR_DIR=str(tmp_path / "var")),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        body = home = ""
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and process.poll() is None:
            try:
                base = f"http://127.0.0.1:{port}"
                body = urllib.request.urlopen(f"{base}/versions/demo-1.0.0/", timeout=5).read().decode()
                home = home or urllib.request.urlopen(f"{base}/", timeout=5).read().decode()  # the first answer
                if "ready." in log.read_text() and SCORED.search(log.read_text()):
                    break
            except OSError:
                pass
            time.sleep(0.5)
        output = log.read_text()
        assert "DampNest" in body, output
        assert "ready." in output, f"the Celery worker did not start:\n{output}"
        assert (tmp_path / "var" / "db.sqlite3").exists()
        # The demo's runs score in the background (issue 37, item 8): queued before the server starts, the first
        # page says so, and the worker scores their items.
        assert output.count("queued for the worker") == 3, output
        notice = home.split('id="release-scoring"')[1].split("</p>")[0]
        assert "Reference (calibration)" in notice and "Sample upload (demo)" in notice, home
        assert SCORED.search(output), f"the worker scored no item of the demo:\n{output}"
    finally:
        stop(process)
