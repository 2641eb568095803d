"""A Redis database of one's own on a shared server: claimed in database 0 with SET NX, so test runs and benchmark
scripts sharing one Redis never empty each other's broker (used by tests/conftest.py and scripts/bench_pipeline.py)."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator


class RedisTaken(Exception):
    """Every database 1-15 stayed claimed by someone else."""


@contextlib.contextmanager
def redis_database_claimed(redis_url: str, *, wait_seconds: int, ttl_seconds: int) -> Iterator[str]:
    """The URL of a database of its own (not the one `redis_url` names), emptied before and after."""
    import redis

    base, own = redis_url.rsplit("/", 1)
    claims = redis.Redis.from_url(f"{base}/0")
    token = f"{os.getpid()}-{uuid.uuid4().hex}"
    for _ in range(wait_seconds):
        number = next(
            (
                n
                for n in range(1, 16)
                if str(n) != own and claims.set(f"rcb:test-broker:{n}", token, nx=True, ex=ttl_seconds)
            ),
            None,
        )
        if number is not None:
            break
        time.sleep(1)
    else:
        raise RedisTaken("every Redis database 1-15 is claimed by another test run")
    url = f"{base}/{number}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    try:
        yield url
    finally:
        client.flushdb()
        if claims.get(f"rcb:test-broker:{number}") == token.encode():
            claims.delete(f"rcb:test-broker:{number}")
