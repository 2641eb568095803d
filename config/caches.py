"""Django's Redis cache that keeps answering while Redis is down: from a memory cache of this process.

What the site keeps in the cache (ranks, API throttles' histories, sign-up rate limits, built downloads' digests) is
recomputable or a count, so an outage costs only a recount: ranks are computed again, throttles count per process.
django-redis's IGNORE_EXCEPTIONS would turn every read into None instead, which DRF's throttle and
django-ratelimit cannot take (they read a list and a number), so the fallback is a real cache, Django's LocMemCache.
"""

from __future__ import annotations

import logging
import threading
import time

from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

# While Redis is down, it is tried again after this many seconds, not on every call (each try costs a connect).
RETRY_SECONDS = 5.0
UNREACHABLE = (RedisConnectionError, RedisTimeoutError)


class RedisCacheWithLocalFallback(RedisCache):
    """RedisCache; a call that cannot reach Redis is answered by a LocMemCache of this process, and Redis is tried
    again every RETRY_SECONDS. Logs one line when the outage begins and one when it ends."""

    def __init__(self, server, params):
        super().__init__(server, params)
        self.local = LocMemCache(f"redis-fallback-{id(self)}", {"TIMEOUT": params.get("TIMEOUT", 300)})
        self._down_since: float | None = None
        self._retry_at = 0.0
        self._lock = threading.Lock()

    def _call(self, name: str, *args, **kwargs):
        if self._down_since is None or time.monotonic() >= self._retry_at:
            try:
                result = getattr(super(), name)(*args, **kwargs)
            except UNREACHABLE as exc:
                self._outage(exc)
            else:
                if self._down_since is not None:
                    self._recovered()
                return result
        return getattr(self.local, name)(*args, **kwargs)

    def _outage(self, exc: Exception) -> None:
        with self._lock:
            self._retry_at = time.monotonic() + RETRY_SECONDS
            if self._down_since is None:
                self._down_since = time.monotonic()
                logger.warning(
                    "the cache's Redis is unreachable (%s); this process caches in its own memory until it answers", exc
                )

    def _recovered(self) -> None:
        with self._lock:
            if self._down_since is not None:
                logger.warning("the cache's Redis answers again after %.0f s", time.monotonic() - self._down_since)
                self._down_since = None
                self.local.clear()  # what was counted meanwhile was this process's alone

    def add(self, *args, **kwargs):
        return self._call("add", *args, **kwargs)

    def get(self, *args, **kwargs):
        return self._call("get", *args, **kwargs)

    def set(self, *args, **kwargs):
        return self._call("set", *args, **kwargs)

    def touch(self, *args, **kwargs):
        return self._call("touch", *args, **kwargs)

    def delete(self, *args, **kwargs):
        return self._call("delete", *args, **kwargs)

    def get_many(self, *args, **kwargs):
        return self._call("get_many", *args, **kwargs)

    def has_key(self, *args, **kwargs):
        return self._call("has_key", *args, **kwargs)

    def incr(self, *args, **kwargs):
        return self._call("incr", *args, **kwargs)

    def set_many(self, *args, **kwargs):
        return self._call("set_many", *args, **kwargs)

    def delete_many(self, *args, **kwargs):
        return self._call("delete_many", *args, **kwargs)

    def clear(self):
        self.local.clear()
        return self._call("clear")
