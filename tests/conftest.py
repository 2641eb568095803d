"""Shared fixtures: real services or a skip with the reason (a failure under CI=true), and a demo version."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DEMO_PSET = REPO / "benchmarks" / "demo"
UNDER_CI = os.environ.get("CI") == "true"


def service_missing(service: str, reason: str) -> None:
    """Skip locally; under CI a missing service is a failure, never a silent skip."""
    message = f"{service} is not available: {reason}"
    if UNDER_CI:
        pytest.fail(f"{message} (required under CI=true)")
    pytest.skip(message)


def _tcp_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def redis_url() -> str:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        service_missing("Redis", f"{url}: {exc}")
    return url


@pytest.fixture
def tcp_open():
    return _tcp_open


@pytest.fixture
def demo_version(db):
    from benchmarks.services import pset_import

    return pset_import(root=DEMO_PSET, version_name="demo-test", publish=True).version
