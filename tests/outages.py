"""Services of a test's own that it may stop and start again: a Redis server and a PostgreSQL cluster on free ports.

Never the machine's shared servers (other people's work uses them): every process here is started by the test, in a
temporary folder, and stopped by it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import free_port, polled, service_missing

# Workers look for lost work every 2 s and re-dispatch what has no result and no live task after 6 s (a run whose
# messages are read: after 4 s).
WATCH = {"RUN_WATCH_SECONDS": "2", "RUN_REDISPATCH_SECONDS": "6", "RUN_LOST_SECONDS": "4", "SANDBOX_BACKEND": "local"}


class RedisServer:
    """redis-server keeping nothing on disk (no RDB, no AOF): a restart loses every queued message."""

    def __init__(self, folder: Path):
        self.folder, self.port, self.process = folder, free_port(), None
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            service_missing("redis-server", "not installed (apt-get install redis-server)")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _answers(self) -> bool:
        import redis

        try:
            return redis.Redis(port=self.port, socket_connect_timeout=0.5).ping()
        except redis.RedisError:
            return False

    def start(self) -> RedisServer:
        log = (self.folder / "redis.log").open("a")
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
                "--protected-mode",
                "yes",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        polled(self._answers, timeout=20, what=f"redis-server on port {self.port}", interval=0.1)
        return self

    def kill(self) -> None:
        """SIGKILL: the server dies mid-flight, as a crash or an OOM kill would."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=20)


def _postgres_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        service_missing("PostgreSQL server binaries", "no /usr/lib/postgresql/*/bin/pg_ctl")
    return Path(found[-1]).parent


class PostgresCluster:
    """A PostgreSQL cluster of the test's own (initdb in a temporary folder, trust auth on 127.0.0.1), run as the
    postgres user via runuser."""

    def __init__(self):
        if os.geteuid() != 0 or shutil.which("runuser") is None:
            service_missing("a private PostgreSQL cluster", "needs root and runuser to run it as the postgres user")
        self.bin, self.port = _postgres_bin(), free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="rcb-pg-", dir="/tmp"))
        shutil.chown(self.folder, "postgres", "postgres")
        self.data = self.folder / "data"

    def _as_postgres(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["runuser", "-u", "postgres", "--", *command], capture_output=True, text=True, check=check, timeout=120
        )

    def url(self, name: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def init(self) -> PostgresCluster:
        self._as_postgres(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync")
        return self

    def start(self) -> None:
        self._as_postgres(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.folder / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50",
            "start",
        )

    def stop(self, mode: str = "immediate") -> None:
        """`immediate` ends every session at once, as a crash of the server would."""
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextmanager
def default_database(url: str) -> Iterator[None]:
    """This thread's default database alias points at `url` (its schema migrated) for the block, then back."""
    import environ
    from django.core.management import call_command
    from django.db import connections
    from django.db.utils import load_backend

    original = connections["default"]
    conf = connections.configure_settings({"default": environ.Env.db_url_config(url)})["default"]
    switched = load_backend(conf["ENGINE"]).DatabaseWrapper(conf, "default")
    connections["default"] = switched
    try:
        call_command("migrate", verbosity=0, interactive=False)
        yield
    finally:
        switched.close()
        connections["default"] = original


@pytest.fixture
def own_redis(tmp_path):
    server = RedisServer(tmp_path).start()
    yield server
    server.kill()


@pytest.fixture
def own_postgres():
    cluster = PostgresCluster().init()
    cluster.start()
    yield cluster
    cluster.remove()
