"""Shared fixtures: real services or a skip with the reason (a failure under CI=true), and a demo version."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.core.cache.backends.redis import RedisCache

from config.caches import RedisCacheWithLocalFallback

REPO = Path(__file__).resolve().parent.parent
DEMO_PSET = REPO / "benchmarks" / "demo"
UNDER_CI = os.environ.get("CI") == "true"

# The services a test may stop and start again (own_redis, own_postgres), for every module; what each parallel
# worker has of its own, and which tests run alone (tests/parallel.py); the rows every test starts with, whatever ran
# before it (tests/database.py).
pytest_plugins = ["tests.outages", "tests.parallel", "tests.database"]


def pytest_configure(config) -> None:
    """The suite hashes passwords with MD5: PBKDF2's 0.26 s per conftest user is deliberate cost, not something
    tested. Imports queue no preparation of their tasks (dozens of releases are imported), publishing no Harbor
    dataset build and no calibration runs: the tests of each turn it on."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.RELEASE_PREPARE = False
    # A release published in a test would have a sandbox worker of a later test export it for minutes; the tests of
    # the Harbor dataset build it themselves (tests/evaluation/test_harbor_dataset.py).
    settings.HARBOR_DATASET_DOWNLOAD = False
    settings.RELEASE_CALIBRATE_ON_PUBLISH = False


# Markers given by what a test uses, so a fast loop can leave the heavy kinds out (docs/DEVELOPING.md: make test-fast).
_MARKED_BY_FIXTURE = {
    "browser": {"browser_page", "live_server", "page"},
    "worker": {"celery_worker_factory", "worker_broker"},
    "sandbox": {"sandbox_cache", "sandbox"},
}


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        for marker, names in _MARKED_BY_FIXTURE.items():
            if fixtures & names:
                item.add_marker(marker)
        if "docker" in item.nodeid.lower():
            item.add_marker("docker")
            item.add_marker("sandbox")


def pytest_runtest_setup(item) -> None:
    """A test marked `postgres` checks what PostgreSQL itself does (a NUL refused in text, a column's size kept): on
    another database it is skipped, and under CI (which runs on PostgreSQL) it fails."""
    if item.get_closest_marker("postgres"):
        from django.db import connection

        if connection.vendor != "postgresql":
            service_missing("PostgreSQL", f"the tests run on {connection.vendor}: set DATABASE_URL to a PostgreSQL")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """A test that leaves another Celery app current errors at its teardown, and the project's app is current again
    for the tests after it (tests/test_celery_client.py says why)."""
    try:
        result = yield
    except BaseException:
        _celery_app_restored()
        raise
    left = _celery_app_restored()
    if left is not None:
        pytest.fail(f"the test left the Celery app {left!r} current: build a test's own app with celery_client()")
    return result


def _celery_app_restored():
    """The app other than the project's that was current (made the project's again), or None."""
    import sys

    project = sys.modules.get("config.celery")
    if project is None:
        return None
    from celery import _state

    current = _state.get_current_app()
    if current is project.app:
        return None
    project.app.set_current()
    return current


def service_missing(service: str, reason: str) -> None:
    """Skip locally; under CI a missing service is a failure, never a silent skip."""
    message = f"{service} is not available: {reason}"
    if UNDER_CI:
        pytest.fail(f"{message} (required under CI=true)")
    pytest.skip(message)


def demo_papers(folder: Path, *papers: str) -> Path:
    """A copy of the demo set in `folder` with only `papers` (their ids): for a test whose subject is not how many
    items or papers there are, fewer to run."""
    pset = folder / "pset"
    shutil.copytree(DEMO_PSET, pset, ignore=lambda _, names: [n for n in names if (DEMO_PSET / n).is_dir()])
    for paper in papers:
        shutil.copytree(DEMO_PSET / paper, pset / paper)
    entries = (pset / "papers.yaml").read_text().split("\n- id: ")
    kept = [entries[0]] + [entry for entry in entries[1:] if entry.split("\n", 1)[0].strip() in papers]
    (pset / "papers.yaml").write_text("\n- id: ".join(kept))
    return pset


def free_port() -> int:
    """A localhost port nothing listens on now, for a server a test starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tcp_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def polled(query, *, timeout: float, what: str = "the condition", worker=None, interval: float = 0.25):
    """Poll `query()` until it returns something truthy and return that: the suite's one way to wait for a worker.
    A database error counts as not yet (some tests stop the database meanwhile); the last one is in the failure."""
    from django.db import DatabaseError, connection

    deadline, error = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            value = query()
        except DatabaseError as exc:
            connection.close()
            value, error = None, exc
        if value:
            return value
        time.sleep(interval)
    logs = worker.output()[-6000:] if worker else ""
    pytest.fail(
        f"timed out after {timeout:.0f} s waiting for {what}" + (f" (last: {error})" if error else "") + f"\n{logs}"
    )


@pytest.fixture
def redis_url() -> str:
    import redis

    from tests import parallel

    url = os.environ.get("REDIS_URL") or parallel.redis_url_of_this_worker or parallel.REDIS_URL_DEFAULT

    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        service_missing("Redis", f"{url}: {exc}")
    return url


@pytest.fixture
def tcp_open():
    return _tcp_open


@pytest.fixture
def release(media_root):
    """The demo set imported and published as release 1.0.0, its files in this test's media folder: the one release
    fixture of the suite (a test that needs another name or other options imports its own)."""
    from benchmarks.services.psets import pset_import

    return pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version


def database_url_for_workers() -> str:
    """The URL of the database this test process uses (the test database), for worker subprocesses."""
    from django.db import connection

    conf = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{conf['NAME']}"
    user = conf["USER"] or "postgres"
    auth = f"{user}:{conf['PASSWORD']}" if conf["PASSWORD"] else user
    return f"postgres://{auth}@{conf['HOST'] or '127.0.0.1'}:{conf['PORT'] or 5432}/{conf['NAME']}"


@pytest.fixture(scope="session")
def sandbox_cache(tmp_path_factory) -> Path:
    """One environment cache for the whole session, so each environment is built once. A parallel worker's sits
    beside the other workers' caches, so that the download cache next to them (`dists`, which a host's workers share
    by design) fetches each file once for the whole run; its environments stay its own, as some tests list them."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return _sandbox_cache_alone(tmp_path_factory)
    folder = tmp_path_factory.getbasetemp().parent / f"sandbox-cache-{worker}"
    folder.mkdir()
    return folder


def _sandbox_cache_alone(tmp_path_factory) -> Path:
    """With no parallel workers, the one environment cache of the run (sandbox_cache_shared is the same)."""
    folder = tmp_path_factory.getbasetemp() / "sandbox-cache"
    folder.mkdir(exist_ok=True)
    return folder


# The one torch environment of the run (the Muon package's requirements: torch and numpy), for every module that
# builds one in sandbox_cache_shared: two environments of torch were two installs of a gigabyte, a minute or more each.
TORCH_REQUIREMENTS = (REPO / "tests/evaluation/packages/muon/muon/paper2code_requirements.txt").read_text()


@pytest.fixture(scope="session")
def sandbox_cache_shared(tmp_path_factory) -> Path:
    """One environment cache for every parallel worker of the run, for the environments too big to build once per
    worker (torch's: a gigabyte installed, minutes on a loaded machine): a module whose tests build one overrides
    `sandbox_cache` with it. Each build holds its environment's lock (sandbox/venv.py), as a host's worker processes
    sharing a cache do, so the first worker builds it and the others wait for it and reuse it."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _sandbox_cache_alone(tmp_path_factory)
    folder = tmp_path_factory.getbasetemp().parent / "sandbox-cache-shared"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture
def media_root(settings, tmp_path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def executor_backend():
    """`executor_backend(backend)` makes `backend` the one this process runs items on; the settings' choice again
    (and every session closed) when the test ends."""
    from evaluation import executor

    def use(backend):
        executor.backend_use(backend)
        return backend

    yield use
    executor.backend_use(None)


@pytest.fixture
def sandbox(settings, sandbox_cache, executor_backend):
    """Validation runs in bwrap (a real sandbox), with a fresh executor cache for this test (the submissions and
    the release checks use it)."""
    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    settings.SANDBOX_BACKEND, settings.SANDBOX_CACHE_DIR = "bwrap", sandbox_cache
    settings.SUBMISSION_REFERENCE_RUNS = 2
    settings.SUBMISSION_MUTANTS = 0  # a test of the mutation score asks for its mutants
    return executor_backend(backend)


@pytest.fixture
def worker_broker(request):
    """A Redis database of its own for this test's broker, emptied before and after. Databases are claimed in
    database 0 (SET NX), so test runs sharing one Redis server never empty each other's broker. A test marked
    `own_broker` kills its broker: it gets a Redis server of its own (tests/outages.py: own_redis)."""
    from scripts.redis_claim import RedisTaken, redis_database_claimed

    if request.node.get_closest_marker("own_broker"):
        yield request.getfixturevalue("own_redis").url
        return
    redis_url = request.getfixturevalue("redis_url")
    try:
        with redis_database_claimed(redis_url, wait_seconds=600, ttl_seconds=3600) as url:
            yield url
    except RedisTaken as exc:
        pytest.fail(str(exc))


@pytest.fixture
def fresh_broker(worker_broker):
    """The project's app publishing to a Redis database of this test's own (worker_broker) and back to its broker
    after: setting CELERY_BROKER_URL alone changes nothing once the app's producer pool holds a connection."""
    from config.celery import app

    saved = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.broker_url, app.conf.broker_transport_options = worker_broker, {}
    _pool_reset(app)
    yield worker_broker
    app.conf.broker_url, app.conf.broker_transport_options = saved
    _pool_reset(app)


def _die_with_parent() -> None:
    """In a test's worker before it starts: killed when the test process dies, however it dies, so that no orphaned
    worker lives on to take the tasks of a later run that claims the same Redis database."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class WorkerProcess:
    """A real Celery worker in its own process group, sharing this test's database, storage and broker."""

    def __init__(self, *, broker: str, queues: str, env: dict[str, str], log: Path, loglevel: str = "INFO"):
        self.broker, self.queues, self.env, self.log, self.loglevel = broker, queues, env, log, loglevel
        self.process = None

    def start(self) -> WorkerProcess:
        import subprocess
        import sys

        celery = str(Path(sys.executable).with_name("celery"))
        command = [
            celery,
            "-A",
            "config",
            "worker",
            "--queues",
            self.queues,
            "--concurrency",
            "1",
            "--loglevel",
            self.loglevel,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--hostname",
            f"test-{os.getpid()}-{id(self)}@%h",
        ]
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            env=self.env,
            stdout=self.log.open("a"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        return self

    def kill(self, sig: int = 9) -> None:
        """Signal the whole process group (main process and pool children)."""
        import signal

        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout=30)
            except Exception:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


@pytest.fixture
def celery_worker_factory(worker_broker, media_root, sandbox_cache, tmp_path, settings):
    """Start real workers: `start(queues="sandbox", SANDBOX_BACKEND="bwrap", ...)`; all are stopped afterwards."""
    import signal

    settings.CELERY_BROKER_URL = worker_broker
    from config.celery import app

    saved = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.broker_url, app.conf.broker_transport_options = worker_broker, {}
    _pool_reset(app)
    workers: list[WorkerProcess] = []

    def start(*, queues: str = "default,llm,sandbox", loglevel: str = "INFO", **extra: str) -> WorkerProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("CELERY_RESULT_BACKEND",)}
        env.update(
            {
                "DATABASE_URL": database_url_for_workers(),
                "CELERY_BROKER_URL": worker_broker,
                "MEDIA_ROOT": str(media_root),
                "SANDBOX_CACHE_DIR": str(sandbox_cache),
                **extra,
            }
        )
        log = tmp_path / f"worker{len(workers)}.log"
        worker = WorkerProcess(broker=worker_broker, queues=queues, env=env, log=log, loglevel=loglevel)
        workers.append(worker.start())
        return worker

    yield start
    for worker in workers:
        worker.kill(signal.SIGTERM)
    app.conf.broker_url, app.conf.broker_transport_options = saved
    _pool_reset(app)


@contextlib.contextmanager
def embedded_worker(tmp_path: Path, *, queues: str, env: dict[str, str]):
    """A worker on kombu's filesystem broker (no Redis), as `make run` starts one; this process publishes there too.
    Yields (worker, the broker's queue folder)."""
    from config.celery import app

    folders = {name: tmp_path / "broker" / name for name in ("queue", "processed", "control")}
    for folder in folders.values():
        folder.mkdir(parents=True)
    saved = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.broker_url = "filesystem://"
    app.conf.broker_transport_options = {
        "data_folder_in": str(folders["queue"]),
        "data_folder_out": str(folders["queue"]),
        "processed_folder": str(folders["processed"]),
        "control_folder": str(folders["control"]),
        "store_processed": False,
    }
    _pool_reset(app)
    environment = {
        k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "REDIS_URL", "CELERY_RESULT_BACKEND")
    }
    environment.update({"VAR_DIR": str(tmp_path), "DATABASE_URL": database_url_for_workers(), **env})
    worker = WorkerProcess(broker="filesystem://", queues=queues, env=environment, log=tmp_path / "worker.log")
    try:
        worker.start()
        yield worker, folders["queue"]
    finally:
        worker.kill(15)
        app.conf.broker_url, app.conf.broker_transport_options = saved
        _pool_reset(app)


def _pool_reset(app) -> None:
    """Drop pooled broker connections so the next publish uses the current broker settings."""
    from kombu import pools

    # kombu keeps pools in a registry keyed by broker: reset it whole, or a closed pool is handed out again.
    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


def celery_client(**conf):
    """A Celery app of a test's own (a client of a worker it started), never made current. Celery makes each new app
    the thread's current one, and the project's tasks (shared_task) are looked up in the current app: a client left
    current took every later publish of the process, on its own broker and never eager, and once a _pool_reset closed
    the pools it failed with "Acquire on closed pool"."""
    from celery import Celery

    return Celery(set_as_current=False, **conf)


def sandbox_backend_or_missing(name: str, cache: Path):
    """The named sandbox backend, or a skip (a failure under CI) saying why it cannot run here."""
    from sandbox import backend_get

    try:
        backend = backend_get(name, cache_dir=cache)
    except Exception as exc:
        service_missing(f"sandbox backend {name}", f"{type(exc).__name__}: {exc}")
    ok, reason = backend.available()
    if not ok:
        service_missing(f"sandbox backend {name}", reason)
    return backend


@pytest.fixture(scope="session", autouse=True)
def _workers_disconnected_at_the_end(django_db_setup, django_db_blocker):
    """Workers started by tests (one SIGKILLed on purpose) may leave sessions that block dropping the test DB."""
    yield
    from django.db import connection

    # pytest-django creates the test database only when a collected test uses it; otherwise there is none to clean.
    if connection.vendor == "postgresql" and connection.settings_dict["NAME"].startswith("test_"):
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity "
                "where datname = current_database() and pid <> pg_backend_pid()"
            )


@pytest.fixture
def author(db):
    return User.objects.create_user("ada", email="ada@example.org", password="pw-ada-12345")


@pytest.fixture
def other_author(db):
    return User.objects.create_user("bob", email="bob@example.org", password="pw-bob-12345")


@pytest.fixture
def maintainer(db):
    user = User.objects.create_user("maya", email="maya@example.org", password="pw-maya-12345")
    user.groups.add(Group.objects.get_or_create(name="maintainers")[0])
    return user


@pytest.fixture
def admin(db):
    return User.objects.create_superuser("root", email="root@example.org", password="pw-root-12345")


def cache_empty() -> None:
    """Drop what the cache holds (API throttles, rate limits, ranks). Under Redis only the cache's own keys go: a
    flush of its database would also drop the claims of every test run sharing the server (scripts/redis_claim.py
    keeps them there), and another run's workers would then take this run's broker."""
    from django.core.cache import caches

    cache = caches["default"]  # the backend itself (django.core.cache.cache is a proxy of it)
    if not isinstance(cache, RedisCache):
        cache.clear()
        return
    client = cache._cache.get_client(write=True)
    stale = list(client.scan_iter(match=f"{cache.key_prefix}:*", count=1000))  # Django's keys: prefix:version:key
    if stale:
        client.delete(*stale)
    if isinstance(cache, RedisCacheWithLocalFallback):
        cache.local.clear()


@pytest.fixture(autouse=True)
def _fresh_cache():
    """API throttles and rate limits count in the cache (Redis under CI): each test starts from zero."""
    cache_empty()


@pytest.fixture
def browser_page(live_server):
    """A page in Debian's headless Chromium driven by Playwright (no browser download), over the live server."""
    import shutil

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        service_missing("Chromium", f"{chromium} not found (apt-get install chromium)")
    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are still synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(60_000)
        yield page
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def client_for(user=None):
    """A REST API client that authenticates as `user` with their token (anonymous when None)."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def page_text(html: str) -> str:
    """A page as a reader sees its text: tags dropped, entities resolved. Highlighted code is one span per token,
    so a line of code is found (or proven absent) only in this form."""
    import re
    from html import unescape

    return unescape(re.sub(r"<[^>]+>", "", html))


def download_body(response) -> bytes:
    """A download's bytes: downloads are streamed, never one body in memory."""
    assert response.streaming, "downloads are streamed"
    return b"".join(response.streaming_content)


def items_read(data: bytes) -> list[dict]:
    """The items of an items JSONL, each with its `prompt` rebuilt by the reader the docs describe; each paper's
    line comes once."""
    import json

    from benchmarks.paper2code import items_read as read

    lines = data.decode("utf-8").splitlines()
    papers = [json.loads(line)["paper"] for line in lines if line.startswith('{"type": "paper"')]
    assert len(papers) == len(set(papers)), "each paper's text is written once"
    return list(read(lines))
