"""Upgrade check: fill a database with an older commit's code, back it up and restore it as an operator would,
migrate it with the current code, and prove that no row was lost or changed and the new code still reads it.

    .venv/bin/python scripts/upgrade_check.py [--from REF] [--pg URL] [--sandbox-cache DIR]

Exit status: 0 all checks passed, 1 a check failed (data lost or changed, check or makemigrations failing),
2 the check could not be set up (git, PostgreSQL, or the old tree cannot run).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

REPO = Path(__file__).resolve().parent.parent
DEMO_VERSION = "demo-1.0.0"
ADMIN, ADMIN_PASSWORD = "admin", "pw-upgrade-admin-12345"

# Rows the management commands leave empty (groups, tokens, submissions), then the scores the old code stored.
SEED_SHELL = """
import json
from django.contrib.auth.models import Group, User
from rest_framework.authtoken.models import Token
from submissions import services
admin = User.objects.get(username=ADMIN_NAME)
admin.groups.add(Group.objects.get_or_create(name="maintainers")[0])
Token.objects.create(user=admin)
ada = User.objects.create_user("ada", email="ada@example.org", password="pw-ada-12345")
sub = services.submission_create(author=ada)
sub = services.draft_update(submission=sub, actor=ada, values={"metadata": {"title": "Upgrade check paper"}})
sub = services.draft_paper_save(submission=sub, actor=ada, paper_path="paper2code_paper.md", text="# A paper\\n")
services.comment_add(submission=sub, actor=ada, body="Kept across upgrades.")
from evaluation.models import RunScore
scores = RunScore.objects.filter(paper__isnull=True).select_related("run__model").order_by("pk")
print(json.dumps({s.run.model.name: s.scaled_pass_rate for s in scores}))
""".replace("ADMIN_NAME", repr(ADMIN))
NEW_READS = f"""
import json
from django.contrib.auth import authenticate
from django.core.files.storage import default_storage
from benchmarks.models import BenchmarkVersion, Blob
from leaderboard.selectors.table import leaderboard_rows
rows = leaderboard_rows(version=BenchmarkVersion.objects.get(name="{DEMO_VERSION}"))
print(json.dumps({{
    "leaderboard": [[r.rank, r.run.model.name, r.score.scaled_pass_rate, r.score.items] for r in rows],
    "login": authenticate(username="{ADMIN}", password="{ADMIN_PASSWORD}") is not None,
    "blobs": Blob.objects.count(),
    "blobs_stored": sum(default_storage.exists(b.storage_name) for b in Blob.objects.all()),
}}))
"""
# Tables that the migrations applied by this upgrade remove (DeleteModel, AlterModelTable, ...).
TABLES_DROPPED_BY_MIGRATIONS = """
import json, os
from django.db import connection
from django.db.migrations.loader import MigrationLoader
loader = MigrationLoader(connection)
old = [tuple(n) for n in json.loads(os.environ["UPGRADE_OLD_MIGRATIONS"]) if tuple(n) in loader.graph.nodes]
tables = lambda state: {m._meta.db_table for m in state.apps.get_models(include_auto_created=True)}
print(json.dumps(sorted(tables(loader.project_state(old)) - tables(loader.project_state()))))
"""
# Columns of remaining tables that those migrations remove (RemoveField): table -> columns.
COLUMNS_DROPPED_BY_MIGRATIONS = """
import json, os
from django.db import connection
from django.db.migrations.loader import MigrationLoader
loader = MigrationLoader(connection)
old = [tuple(n) for n in json.loads(os.environ["UPGRADE_OLD_MIGRATIONS"]) if tuple(n) in loader.graph.nodes]
def columns(state):
    return {(m._meta.db_table, f.column) for m in state.apps.get_models(include_auto_created=True)
            for f in m._meta.local_concrete_fields}
dropped = {}
for table, column in sorted(columns(loader.project_state(old)) - columns(loader.project_state())):
    dropped.setdefault(table, []).append(column)
print(json.dumps(dropped))
"""


class SetupError(Exception):
    """The check itself cannot run (exit status 2)."""


class CommandFailed(Exception):
    pass


@dataclass
class Table:
    columns: list[str]
    key: list[str]  # primary key columns, or every column when the table has none
    rows: dict[str, str]  # key as text -> md5 of the row over `columns`

    @property
    def digest(self) -> str:
        return hashlib.md5("".join(self.rows.values()).encode()).hexdigest()


def db_url(base: str, name: str) -> str:
    return urlsplit(base)._replace(path="/" + name).geturl()


def connect(url: str) -> psycopg.Connection:
    # Timestamps print in the session's time zone: fix it so both sides print rows alike.
    return psycopg.connect(url, autocommit=True, options="-c TimeZone=UTC", connect_timeout=5)


def rows_read(conn: psycopg.Connection, table: str, columns: list[str], key: list[str]) -> dict[str, str]:
    def ids(names: list[str]) -> sql.Composed:
        return sql.SQL(", ").join(map(sql.Identifier, names))

    query = sql.SQL("select row({key})::text, md5(row({cols})::text) from {table} order by {key}").format(
        key=ids(key), cols=ids(columns), table=sql.Identifier(table)
    )
    return dict(conn.execute(query).fetchall())


def columns_read(conn: psycopg.Connection, table: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "select column_name from information_schema.columns where table_schema = "
            "'public' and table_name = %s order by ordinal_position",
            (table,),
        )
    ]


def sequences_read(conn: psycopg.Connection) -> dict[str, int]:
    return dict(
        conn.execute(
            "select sequencename, coalesce(last_value, 0) from pg_sequences where schemaname = 'public'"
        ).fetchall()
    )


def snapshot(url: str) -> tuple[dict[str, Table], dict[str, int]]:
    """Every table's rows (md5 per row, by primary key) and every sequence's last value."""
    with connect(url) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "select table_name from information_schema.tables where table_schema "
                "= 'public' and table_type = 'BASE TABLE' order by 1"
            )
        ]
        tables = {}
        for name in names:
            columns = columns_read(conn, name)
            key = [
                r[0]
                for r in conn.execute(
                    "select k.column_name from information_schema.table_constraints c join information_schema."
                    "key_column_usage k using (constraint_schema, constraint_name, table_name) where c.table_schema"
                    " = 'public' and c.table_name = %s and c.constraint_type = 'PRIMARY KEY'"
                    " order by k.ordinal_position",
                    (name,),
                )
            ] or columns
            tables[name] = Table(columns, key, rows_read(conn, name, columns, key))
        sequences = sequences_read(conn)
    return tables, sequences


def migrations_applied(url: str) -> list[list[str]]:
    with connect(url) as conn:
        return [list(r) for r in conn.execute("select app, name from django_migrations order by id")]


class UpgradeCheck:
    def __init__(self, ref: str, pg: str, sandbox_cache: Path | None):
        self.ref, self.pg, self.sandbox_cache = ref, pg, sandbox_cache
        self.timings: dict[str, float] = {}
        self.problems: list[str] = []
        self.root = Path(tempfile.mkdtemp(prefix="rcb-upgrade-"))
        self.old_tree = self.root / "old"
        self.old_db, self.restored_db = f"rcb_upgrade_old_{os.getpid()}", f"rcb_upgrade_restored_{os.getpid()}"
        self.created: list[str] = []

    @contextmanager
    def step(self, name: str):
        print(f"\n== {name}", flush=True)
        start = time.monotonic()
        try:
            yield
        finally:
            self.timings[name] = time.monotonic() - start

    def env(self, db: str, var: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REDIS_URL", "CELERY_RESULT_BACKEND")}
        env.update(
            DATABASE_URL=db_url(self.pg, db),
            VAR_DIR=str(var),
            MEDIA_ROOT=str(var / "media"),
            STORAGE_BACKEND="filesystem",
            CELERY_BROKER_URL="filesystem://",
            SANDBOX_BACKEND="local",
            SANDBOX_CACHE_DIR=str(self.sandbox_cache or var / "sandbox"),
            DEBUG="true",
            LOG_FORMAT="plain",
            DJANGO_SUPERUSER_USERNAME=ADMIN,
            DJANGO_SUPERUSER_EMAIL="admin@example.org",
            DJANGO_SUPERUSER_PASSWORD=ADMIN_PASSWORD,
        )
        return env

    def manage(self, side: str, *args: str, extra_env: dict[str, str] | None = None) -> str:
        """`manage.py ARGS` with the old tree (side "old") or the current one ("new"); its stdout."""
        tree, db, var = (
            (self.old_tree, self.old_db, self.root / "var-old")
            if side == "old"
            else (REPO, self.restored_db, self.root / "var-new")
        )
        shown = " ".join(a if len(a) < 60 and "\n" not in a else "'...'" for a in args)
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=tree,
            capture_output=True,
            text=True,
            env={**self.env(db, var), **(extra_env or {})},
        )
        print(f"  [{side}] manage.py {shown}  ({time.monotonic() - start:.1f} s)", flush=True)
        if proc.returncode != 0:
            tail = "\n    ".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise CommandFailed(f"[{side}] manage.py {shown} exited {proc.returncode}:\n    {tail}")
        return proc.stdout

    def manage_json(self, side: str, code: str, **kwargs):
        return json.loads(self.manage(side, "shell", "-c", code, **kwargs).strip().splitlines()[-1])

    def database_create(self, name: str) -> None:
        with connect(db_url(self.pg, "postgres")) as conn:
            conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
        self.created.append(name)

    def cleanup(self) -> None:
        try:
            if self.created:
                with connect(db_url(self.pg, "postgres")) as conn:
                    for name in self.created:
                        conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def run(self) -> int:
        with self.step("extract the old tree"):
            sha = _git("rev-parse", "--verify", f"{self.ref}^{{commit}}")
            print(f"  {self.ref} = {sha[:10]} {_git('log', '-1', '--format=%s', sha)}")
            self.old_tree.mkdir()
            archive = subprocess.run(["git", "archive", sha], cwd=REPO, capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(self.old_tree)], input=archive, check=True)
            try:
                self.manage("old", "check")
            except CommandFailed as exc:
                raise SetupError(
                    f"the old tree ({self.ref} = {sha[:10]}) cannot run `manage.py check` with "
                    f"this venv's python ({sys.executable}):\n  {exc}"
                ) from exc

        with self.step("fill a database with the old code"):
            try:
                connect(db_url(self.pg, "postgres")).close()
            except psycopg.OperationalError as exc:
                raise SetupError(f"PostgreSQL does not answer at {db_url(self.pg, 'postgres')}: {exc}") from exc
            self.database_create(self.old_db)
            print(f"  database {self.old_db}")
            self.manage("old", "migrate", "--noinput")
            self.manage("old", "import_pset", "benchmarks/demo", "--version", DEMO_VERSION, "--publish")
            self.manage("old", "createsuperuser", "--noinput")
            self.manage("old", "evaluate", "--model", "reference", "--version", DEMO_VERSION, "--inline")
            stored = self.manage_json("old", SEED_SHELL)
            print(f"  scaled pass@1 stored by the old code: {stored}")

        with self.step("back up (pg_dump) and restore (pg_restore)"):
            dump = self.root / "rcb.dump"
            subprocess.run(["pg_dump", "--format=custom", f"--file={dump}", db_url(self.pg, self.old_db)], check=True)
            self.database_create(self.restored_db)
            restored = db_url(self.pg, self.restored_db)
            subprocess.run(["pg_restore", "--exit-on-error", f"--dbname={restored}", str(dump)], check=True)
            shutil.copytree(self.root / "var-old" / "media", self.root / "var-new" / "media")
            print(f"  {dump.stat().st_size / 1024:.0f} KiB dump restored into {self.restored_db}, MEDIA_ROOT copied")

        with self.step("snapshot the original and the restored database"):
            original, original_seqs = snapshot(db_url(self.pg, self.old_db))
            old, old_seqs = snapshot(db_url(self.pg, self.restored_db))
            old_migrations = migrations_applied(db_url(self.pg, self.restored_db))
            same = {n: t.rows for n, t in original.items()} == {n: t.rows for n, t in old.items()}
            if not same or original_seqs != old_seqs:
                self.problems.append("the restored database differs from the original: pg_dump/pg_restore lost data")
            print(f"  {len(old)} tables, {sum(len(t.rows) for t in old.values())} rows, {len(old_seqs)} sequences")

        with self.step("migrate with the new code"):
            self.manage("new", "migrate", "--noinput")
            applied = migrations_applied(db_url(self.pg, self.restored_db))
            new_migrations = [m for m in applied if m not in old_migrations]
            print(f"  migrations applied by the upgrade: {', '.join('.'.join(m) for m in new_migrations) or 'none'}")

        with self.step("compare every old table"):
            lines = self.compare(old, old_seqs, old_migrations)

        with self.step("check the new code against the upgraded data"):
            for args in (["check"], ["makemigrations", "--check", "--dry-run"]):
                try:
                    self.manage("new", *args)
                except CommandFailed as exc:
                    self.problems.append(str(exc))
            reads = self.manage_json("new", NEW_READS)
            for rank, model, scaled, items in reads["leaderboard"]:
                print(f"  leaderboard {DEMO_VERSION}: #{rank} {model}: scaled pass@1 {scaled:.1f}% over {items} items")
            if [r[2] for r in reads["leaderboard"] if r[1] == "reference"] != [stored.get("reference")]:
                self.problems.append(
                    f"the reference model's scaled pass@1 on the new leaderboard "
                    f"{reads['leaderboard']} differs from the stored {stored}"
                )
            if not reads["login"]:
                self.problems.append(f"the superuser {ADMIN!r} cannot log in with the new code")
            if reads["blobs_stored"] != reads["blobs"]:
                self.problems.append(f"{reads['blobs'] - reads['blobs_stored']} blobs are missing from the storage")
            print(
                f"  login as {ADMIN}: {'ok' if reads['login'] else 'FAILED'}; "
                f"blobs in storage: {reads['blobs_stored']}/{reads['blobs']}"
            )

        self.summary(sha, lines, old, new_migrations)
        return 1 if self.problems else 0

    def compare(self, old: dict[str, Table], old_seqs: dict[str, int], old_migrations) -> list[str]:
        """One summary line per old table; problems for every loss or change."""
        lines = []
        with connect(db_url(self.pg, self.restored_db)) as conn:
            present = {
                r[0]
                for r in conn.execute("select table_name from information_schema.tables where table_schema = 'public'")
            }
            gone = sorted(set(old) - present)
            dropped = (
                set(
                    self.manage_json(
                        "new",
                        TABLES_DROPPED_BY_MIGRATIONS,
                        extra_env={"UPGRADE_OLD_MIGRATIONS": json.dumps(old_migrations)},
                    )
                )
                if gone
                else set()
            )
            columns_gone = {
                name: [c for c in table.columns if c not in columns_read(conn, name)]
                for name, table in old.items()
                if name in present
            }
            columns_dropped = (
                self.manage_json(
                    "new",
                    COLUMNS_DROPPED_BY_MIGRATIONS,
                    extra_env={"UPGRADE_OLD_MIGRATIONS": json.dumps(old_migrations)},
                )
                if any(columns_gone.values())
                else {}
            )
            for name, table in old.items():
                if name not in present:
                    explained = name in dropped
                    lines.append(
                        f"{name:<40} {len(table.rows):>6} {'-':>6}  {table.digest[:12]}  "
                        f"{'dropped by a migration' if explained else 'MISSING'}"
                    )
                    if not explained:
                        self.problems.append(f"table {name} ({len(table.rows)} rows) is gone and no migration drops it")
                    continue
                missing_columns = [c for c in columns_gone[name] if c not in columns_dropped.get(name, [])]
                if missing_columns:
                    self.problems.append(f"table {name}: columns {missing_columns} are gone")
                    lines.append(f"{name:<40} {len(table.rows):>6} {'?':>6}  {table.digest[:12]}  COLUMNS GONE")
                    continue
                if columns_gone[name]:  # a migration removed them: the old rows over the columns that remain
                    kept = [c for c in table.columns if c not in columns_gone[name]]
                    key = [c for c in table.key if c in kept] or kept
                    with connect(db_url(self.pg, self.old_db)) as original:
                        table = Table(kept, key, rows_read(original, name, kept, key))
                    print(f"  {name}: columns {columns_gone[name]} dropped by a migration; compared without them")
                new = rows_read(conn, name, table.columns, table.key)
                lost = [k for k in table.rows if k not in new]
                changed = [k for k in table.rows if k in new and new[k] != table.rows[k]]
                digest = hashlib.md5("".join(new.get(k, "") for k in table.rows).encode()).hexdigest()
                status = "ok" if digest == table.digest else "CHANGED"
                if len(new) < len(table.rows) or lost or changed:
                    self.problems.append(
                        f"table {name}: {len(table.rows)} -> {len(new)} rows, {len(lost)} lost "
                        f"(e.g. {lost[:3]}), {len(changed)} changed (e.g. {changed[:3]})"
                    )
                lines.append(f"{name:<40} {len(table.rows):>6} {len(new):>6}  {table.digest[:12]}  {status}")
            new_seqs = sequences_read(conn)
        for seq, value in old_seqs.items():
            if seq in new_seqs and new_seqs[seq] < value:
                self.problems.append(f"sequence {seq} went back from {value} to {new_seqs[seq]}")
        print(f"  {len(old)} tables compared, {len(present - set(old))} new table(s): {sorted(present - set(old))}")
        return lines

    def summary(self, sha: str, lines: list[str], old: dict[str, Table], new_migrations) -> None:
        print(f"\n== summary: upgrade from {self.ref} ({sha[:10]}) to the working tree of {REPO}")
        print(f"{'table':<40} {'old':>6} {'new':>6}  {'md5 (old)':<12}  old rows over old columns")
        print("\n".join(lines))
        print(
            f"{len(old)} tables, {sum(len(t.rows) for t in old.values())} rows checked; "
            f"{len(new_migrations)} migration(s) applied by the upgrade"
        )
        print(
            "timings: "
            + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.timings.items())
            + f"; total {sum(self.timings.values()):.1f} s"
        )
        for problem in self.problems:
            print(f"FAIL: {problem}")
        print("RESULT: " + ("FAILED" if self.problems else "no data lost, the new code reads the upgraded data"))


def _git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SetupError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def default_pg() -> str:
    url = os.environ.get("UPGRADE_PG_URL") or os.environ.get("DATABASE_URL", "")
    return db_url(url, "postgres") if url.startswith("postgres") else "postgres://postgres@127.0.0.1:5432/postgres"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="ref", default="HEAD~1", help="The old commit (default HEAD~1).")
    parser.add_argument(
        "--pg",
        default=default_pg(),
        help="A PostgreSQL URL whose server may create databases "
        "(default: UPGRADE_PG_URL, DATABASE_URL if PostgreSQL, else postgres@127.0.0.1:5432).",
    )
    parser.add_argument("--sandbox-cache", type=Path, help="Reuse this sandbox environment cache.")
    args = parser.parse_args(argv)
    check = UpgradeCheck(args.ref, args.pg, args.sandbox_cache)
    try:
        return check.run()
    except (SetupError, CommandFailed, subprocess.CalledProcessError) as exc:
        print(f"\nFAIL ({'setup' if isinstance(exc, SetupError) else 'command'}): {exc}", flush=True)
        return 2 if isinstance(exc, SetupError) else 1
    finally:
        check.cleanup()


if __name__ == "__main__":
    sys.exit(main())
