"""Parallel test workers (pytest-xdist, as `make test` runs the suite): what each worker has of its own, which tests
go together, and which run alone.

Each worker (gw0, gw1, ...) has of its own:
- a test database: pytest-django suffixes its name with the worker's id (test_rcb_gw0); on PostgreSQL it is a copy
  of the run's one migrated template (tests/database.py);
- a Redis database for the cache, the default broker and the Celery workers its tests start, claimed in database 0
  as a test's broker is (scripts/redis_claim.py), so one worker's cache never answers (or empties) another's;
- its temporary folders, and so its media folders and sandbox environment cache (pytest's basetemp per worker), and
  a media folder and filesystem broker for what a test stores or queues without a folder of its own; the modules
  that build torch's environments share one cache instead (tests/conftest.py: sandbox_cache_shared), so that it is
  built once for the run;
- ports (tests/conftest.py: free_port asks the kernel), and Docker labels naming its own process (rcb.worker).

`--dist loadgroup` is meant to run a module's tests on one worker, in order; under pytest 9.2 it does not group
(its structured ids drop xdist's @group suffix, pytest-xdist issue 1386), so each test is scheduled alone, the tests
of a Redis or PostgreSQL server of their own (tests/outages.py, group `outages`) included. A test marked `exclusive`
measures time or load, or looks at every container of the Docker engine: it waits until no other test of this run is
running, and none starts until it ends. Without xdist (`pytest -p no:xdist`, or `-n 0`) none of this changes
anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
OUTAGE_FIXTURES = {"own_redis", "own_postgres"}
# The Redis a test asking for one (tests/conftest.py: redis_url) uses when REDIS_URL is not set.
REDIS_URL_DEFAULT = "redis://127.0.0.1:6379/0"
_claimed: contextlib.ExitStack | None = None
# This worker's own Redis database, claimed at its start where a Redis answers (None: none does, or no xdist).
redis_url_of_this_worker: str | None = None


def pytest_configure(config) -> None:
    # Given by pytest-xdist too; named here so that --strict-markers accepts it in a run without xdist.
    config.addinivalue_line("markers", "xdist_group(name): tests of one group run on one worker (--dist loadgroup)")
    config.addinivalue_line(
        "markers",
        "exclusive: runs with no other test of this run running (it measures time or load, or sees the whole "
        "Docker engine; tests/parallel.py)",
    )
    if WORKER:
        config.pluginmanager.register(LongestFirst(), "rcb-longest-first")  # one process: the order changes nothing
        _folders_of_this_worker()
        _redis_of_this_worker()
    elif getattr(config.option, "numprocesses", None) and not config.option.testrunuid:
        # The workers' run folder is named after this id: chosen here, so that the run removes the folder at its end.
        config.option.testrunuid = uuid.uuid4().hex


def pytest_unconfigure(config) -> None:
    global _claimed
    if not WORKER and getattr(config.option, "testrunuid", None):
        shutil.rmtree(run_folder_of(config.option.testrunuid), ignore_errors=True)
    if _claimed is not None:
        _claimed.close()
        _claimed = None


def _run_folder() -> Path:
    """A folder of this run's own, shared by its workers."""
    folder = run_folder_of(os.environ.get("PYTEST_XDIST_TESTRUNUID", "solo"))
    folder.mkdir(exist_ok=True)
    return folder


def run_folder_of(run_id: str) -> Path:
    """Where the run of this id keeps its workers' shared folder (the controller removes it at the run's end)."""
    return Path(tempfile.gettempdir()) / f"rcb-pytest-{run_id}"


def _folders_of_this_worker() -> None:
    """The media folder and the filesystem broker's folders (used where Redis is not) of this worker, for what a
    test stores or queues without a folder of its own (the media_root fixture gives one per test)."""
    from django.conf import settings

    own = _run_folder() / WORKER
    settings.MEDIA_ROOT = own / "media"
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        options: dict[str, str | bool] = {
            "data_folder_in": str(own / "broker" / "queue"),
            "data_folder_out": str(own / "broker" / "queue"),
            "processed_folder": str(own / "broker" / "processed"),
            "control_folder": str(own / "broker" / "control"),
            "store_processed": False,
        }
        for key in ("data_folder_in", "processed_folder", "control_folder"):
            Path(str(options[key])).mkdir(parents=True, exist_ok=True)
        settings.CELERY_BROKER_TRANSPORT_OPTIONS = options
        from config.celery import app

        app.conf.broker_transport_options = options


def _redis_of_this_worker() -> None:
    """Point this worker's cache, default broker and REDIS_URL (which the workers its tests start inherit) at a Redis
    database claimed for this worker alone. With no REDIS_URL (the README's fresh machine) the settings use no Redis,
    but a test asking for one still gets a database of this worker's own, never one the other worker's tests share."""
    global _claimed, redis_url_of_this_worker
    from django.conf import settings

    configured = os.environ.get("REDIS_URL", "")
    base = configured or REDIS_URL_DEFAULT
    if not base.startswith(("redis://", "rediss://")):
        return  # no Redis: the cache is this process's memory and the broker a folder, both already its own
    import redis

    from scripts.redis_claim import redis_database_claimed

    try:
        redis.Redis.from_url(base, socket_connect_timeout=1).ping()
    except redis.RedisError:
        return  # the tests needing Redis skip (or fail under CI) through the redis_url fixture
    _claimed = contextlib.ExitStack()
    url = _claimed.enter_context(redis_database_claimed(base, wait_seconds=600, ttl_seconds=4 * 3600))
    redis_url_of_this_worker = url
    if not configured:
        return
    os.environ["REDIS_URL"] = url
    cache = settings.CACHES["default"]
    if cache.get("LOCATION") == base:
        settings.CACHES = {**settings.CACHES, "default": {**cache, "LOCATION": url}}
        _caches_reset()
    if base == settings.CELERY_BROKER_URL:
        settings.CELERY_BROKER_URL = url
        from config.celery import app

        app.conf.broker_url = url  # type: ignore[misc]  # celery-types has it read-only; Celery's conf is a dict


def _caches_reset() -> None:
    """What Django does when a test overrides CACHES: connections made so far are dropped."""
    from asgiref.local import Local
    from django.core.cache import caches, close_caches

    close_caches()
    caches._settings = caches.settings = caches.configure_settings(None)  # type: ignore[attr-defined]
    caches._connections = Local()  # type: ignore[attr-defined]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Each test's xdist group (used by --dist loadgroup): its module's, or `outages`."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & OUTAGE_FIXTURES or item.get_closest_marker("own_broker"):
            item.add_marker(pytest.mark.xdist_group("outages"))
        else:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


# What a test of each kind takes, roughly (the last full run's --durations on 2 workers: `slow` 40-220 s, a test of a
# broker or database it stops 35-65 s, one starting a Celery worker 15-50 s, most others under a second).
_EXPECTED_SECONDS = (("slow", 100), ("own_broker", 45), ("worker", 30))


class LongestFirst:
    """Under xdist, the longest tests first. xdist hands out the tests one at a time in the collection's order (no
    groups, see above), so a test of minutes handed out near the end ran on while the other worker had nothing left:
    the compose stack's (3.5 min) and the upgrade tests were among the last 30 of 3,100. Longest first, the short
    tests fill in at the end. Sorted after every other reordering (pytest-django's by kind of database test: tests/
    database.py makes any order of kinds safe) and after tests/conftest.py gives the markers by fixture. The sort is
    stable: tests of a kind keep their order, so a module's keep theirs. An `exclusive` test stays where it is: among
    long tests it would wait for one to end with its own worker idle."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items) -> None:
        items.sort(key=lambda item: -_expected_seconds(item))


def _expected_seconds(item) -> int:
    if item.get_closest_marker("exclusive"):
        return 0
    return next((seconds for marker, seconds in _EXPECTED_SECONDS if item.get_closest_marker(marker)), 0)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not WORKER:
        return (yield)
    with _machine_held(exclusive=item.get_closest_marker("exclusive") is not None):
        return (yield)


@contextlib.contextmanager
def _machine_held(*, exclusive: bool) -> Iterator[None]:
    """A readers-writer lock over this run's workers: every test holds the machine shared, an exclusive test holds
    it alone. The gate is a turnstile: an exclusive test waiting at it stops new tests from starting, so it is not
    starved by the others' tests following one another."""
    folder = _run_folder()
    with open(folder / "gate.lock", "a") as gate, open(folder / "machine.lock", "a") as machine:
        if exclusive:
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(machine, fcntl.LOCK_EX)
        else:
            fcntl.flock(gate, fcntl.LOCK_SH)
            fcntl.flock(machine, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(gate, fcntl.LOCK_UN)
