"""What a transactional test's end costs the suite (tests/database.py): Django's flush by TRUNCATE of every table
(the baseline, which left even the migrations' rows out) against the suite's, which deletes the rows and puts back
those the migrations made, in one run on the PostgreSQL of DATABASE_URL (a test database of its own, dropped at the
end).

Each round commits what a small transactional test leaves (a user, a prompt protocol, a model entry), then empties
the database one way; the two ways alternate. Printed: the median seconds of each and their ratio.

Run: DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcb .venv/bin/python scripts/bench_flush.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("DATABASE_URL must name a PostgreSQL database (the suite's flush is by TRUNCATE there only)")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection

    from benchmarks.models import PromptProtocol
    from evaluation.models import ModelEntry
    from tests.database import flushed_by_delete, migrated_rows_restored

    connection.settings_dict["TEST"]["NAME"] = f"bench_flush_{os.getpid()}"
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        migrated = connection.creation.serialize_db_to_string()

        def flush() -> None:  # as TransactionTestCase._fixture_teardown does, serialized_rollback on
            call_command("flush", verbosity=0, interactive=False, reset_sequences=False, inhibit_post_migrate=True)

        def truncate() -> None:  # the migrations' rows are left out (the next serialized_rollback test loads them)
            flush()

        def delete() -> None:
            with flushed_by_delete(connection):
                flush()
            migrated_rows_restored(migrated)

        seconds: dict[str, list[float]] = {"truncate": [], "delete": []}
        for round_ in range(args.rounds):
            for name, empty in (("truncate", truncate), ("delete", delete)):
                User.objects.create_user(f"u{round_}{name}", password="pw")
                PromptProtocol.objects.create(name=f"p{round_}{name}", template="$paper $code")
                ModelEntry.objects.create(name=f"m{round_}{name}", display_name="M", kind="litellm")
                start = time.perf_counter()
                empty()
                seconds[name].append(time.perf_counter() - start)
        before, after = (statistics.median(seconds[name]) for name in ("truncate", "delete"))
        print(f"rounds: {args.rounds}, load average at the end: {os.getloadavg()[0]:.1f}")
        print(f"TRUNCATE flush: median {before:.3f} s (min {min(seconds['truncate']):.3f})")
        print(f"DELETE flush + the migrations' rows put back: median {after:.3f} s (min {min(seconds['delete']):.3f})")
        print(f"ratio: {before / after:.1f}x")
    finally:
        connection.creation.destroy_test_db(connection.settings_dict["NAME"], verbosity=0)


if __name__ == "__main__":
    main()
