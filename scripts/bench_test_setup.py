"""What the test databases' setup costs a parallel run (`make test`: two xdist workers): each worker migrating its own
(the baseline, RCB_TEST_DB_TEMPLATE=0) against the suite's, one migrated template per run copied by each worker
(tests/database.py), on the PostgreSQL of DATABASE_URL.

Each round runs a small suite of two modules, one test each (so one module per worker, as --dist loadgroup hands
them out), with the suite's own plugins (tests/parallel.py, tests/database.py) and fresh test databases
(--create-db), once each way, alternating. Measured: the seconds from starting pytest to the first test started on
both workers. Printed: each run, the median of each way and their ratio.

Run: DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcb .venv/bin/python scripts/bench_test_setup.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CONFTEST = """
import json, os, time

from django.db import connections
from django.db.models.signals import post_migrate

pytest_plugins = ["tests.parallel", "tests.database"]


def record(**row):
    row["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "")
    with open(os.environ["RECORD"], "a") as out:
        out.write(json.dumps(row) + "\\n")


def _migrated(sender, using, plan=None, **kwargs):  # sent once per app: the same row each time
    record(event="migrate", database=connections[using].settings_dict["NAME"], applied=len(plan or []))


post_migrate.connect(_migrated)


def pytest_sessionstart(session):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        record(event="start", started=time.time())
"""
_MODULE = """
import time

from django.db import connection

from conftest import record


def test_first(db):
    started = time.time()
    with connection.cursor() as cursor:
        cursor.execute("select count(*) from django_migrations")
        migrations = cursor.fetchone()[0]
    record(event="test", database=connection.settings_dict["NAME"], migrations=migrations, started=started)
"""


def small_run(folder: Path, *, template: bool, database_url: str) -> tuple[float, float, list[dict]]:
    """Run the small suite in `folder` on two workers: (seconds to the first test started on both, seconds to both
    workers' sessions started, the recorded rows)."""
    (folder / "conftest.py").write_text(_CONFTEST)
    for name in ("test_one.py", "test_two.py"):
        (folder / name).write_text(_MODULE)
    record = folder / "record.jsonl"
    record.unlink(missing_ok=True)
    # Not the calling run's worker (if it is one): the small run has its own, and no Redis database to claim.
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_XDIST", "REDIS_URL"))}
    env.update(
        {
            "RECORD": str(record),
            "PYTHONPATH": str(REPO),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": database_url,
            "RCB_TEST_DB_TEMPLATE": "1" if template else "0",
        }
    )
    command = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "--create-db"]
    started = time.time()
    ran = subprocess.run(
        [*command, "-p", "no:cacheprovider"], cwd=folder, env=env, capture_output=True, text=True, timeout=1200
    )
    if ran.returncode != 0:
        raise RuntimeError(ran.stdout[-3000:] + ran.stderr[-3000:])
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    firsts = {row["worker"]: row["started"] for row in rows if row["event"] == "test"}
    if set(firsts) != {"gw0", "gw1"}:
        raise RuntimeError(f"expected a test on each of two workers, got {rows}")
    sessions = [row["started"] for row in rows if row["event"] == "start"]
    return max(firsts.values()) - started, max(sessions) - started, rows


def database_url_aside(url: str, aside: str = "setup_bench") -> str:
    """DATABASE_URL with a name of its own, so the small run's test databases are not those of a run of the suite."""
    base, _, query = url.partition("?")
    return f"{base}_{aside}" + (f"?{query}" if query else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        sys.exit("DATABASE_URL must name a PostgreSQL database (the template is used there only)")
    seconds: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for template in (False, True) if round_ % 2 == 0 else (True, False):
                took, sessions, _ = small_run(Path(folder), template=template, database_url=database_url_aside(url))
                seconds[template].append(took)
                way = "template" if template else "each worker migrates"
                print(
                    f"round {round_ + 1}: {way}: {took:.1f} s (both workers' sessions started at {sessions:.1f} s)",
                    flush=True,
                )
    baseline, copied = statistics.median(seconds[False]), statistics.median(seconds[True])
    print(f"median to the first test on both workers: each migrates {baseline:.1f} s, template {copied:.1f} s")
    print(f"ratio (each migrates / template): {baseline / copied:.2f}x")


if __name__ == "__main__":
    main()
