"""The test database between tests: every test starts with the rows the migrations made, whatever ran before it on
its worker (tests/parallel.py hands each worker whole modules, in any order of kinds).

A transactional test (transaction=True, transactional_db, live_server) commits, so Django empties every table after
it (its flush). That took the rows the migrations make with it (the rcb-v1 prompt protocol, the calibration models,
the humans' model, content types and permissions), and a later test on the same worker that needs them failed. After
each transactional test they are put back from a snapshot of the database taken right after its migration, so the
migrations stay the one place saying which rows a fresh database has (no list of them here to keep up to date).

On PostgreSQL the flush deletes the rows instead of truncating the tables: a TRUNCATE of the 49 tables takes about
2 s on this machine (each table gets new files, synced at commit), a DELETE of the rows a test made milliseconds
(scripts/bench_flush.py). Django's foreign keys there are deferred, so the order of the deletes does not matter.

On PostgreSQL the parallel workers (tests/parallel.py) migrate once per run, not once each: the first worker to take
a lock in the run's folder creates and migrates a template database (test_<name>_tpl_<run id>), and each worker's
own database (test_<name>_gw0, ...) is made from it by Django's own setup, `CREATE DATABASE ... TEMPLATE` (a copy of
its files), whose migrate then finds nothing to apply. The run's end drops the template. Migrating took each worker
1-2 minutes under load, both at once on two cores (scripts/bench_test_setup.py measures the difference).
RCB_TEST_DB_TEMPLATE=0 turns this off (each worker migrates its own, as pytest-django does); SQLite, a run without
workers, --nomigrations and a --reuse-db run whose database exists already are as pytest-django makes them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

import pytest

TEMPLATE_SWITCH = "RCB_TEST_DB_TEMPLATE"
_migrated: str | None = None  # the rows of the freshly migrated test database (Django's serialized form)


@pytest.fixture(scope="session")
def django_db_setup(request, django_db_setup, django_db_blocker) -> Iterator[None]:
    """pytest-django's test database, with the snapshot of its migrated rows, and flushed by DELETE on PostgreSQL."""
    global _migrated
    from django.db import DEFAULT_DB_ALIAS, connection
    from pytest_django.fixtures import _get_databases_for_setup

    if DEFAULT_DB_ALIAS not in _get_databases_for_setup(request.session.items)[0]:
        yield  # no collected test uses the database: pytest-django made none
        return
    with django_db_blocker.unblock():
        _migrated = migrated = connection.creation.serialize_db_to_string()
    with flushed_by_delete(connection):
        yield
        with django_db_blocker.unblock():
            migrated_rows_restored(migrated)  # after the last test's flush: the database kept by --reuse-db
    _migrated = None


@pytest.fixture(scope="session")
def django_db_modify_db_settings(request, django_db_modify_db_settings, django_db_blocker) -> None:
    """Before pytest-django sets up a worker's test database: have it made from the run's migrated template.
    (tests.parallel is imported in the functions: scripts/bench_flush.py imports this module without the suite.)"""
    from django.db import DEFAULT_DB_ALIAS, connection
    from pytest_django.fixtures import _get_databases_for_setup

    from tests.parallel import WORKER

    if not (
        WORKER
        and os.environ.get(TEMPLATE_SWITCH, "1") != "0"
        and connection.vendor == "postgresql"
        and not request.config.getvalue("nomigrations")
        and DEFAULT_DB_ALIAS in _get_databases_for_setup(request.session.items)[0]
    ):
        return
    keepdb = request.config.getvalue("reuse_db") and not request.config.getvalue("create_db")
    with django_db_blocker.unblock():
        if keepdb and _database_exists(connection, connection.settings_dict["TEST"]["NAME"]):
            return  # --reuse-db: pytest-django migrates what the kept database lacks
        template = template_migrated(connection, verbosity=request.config.option.verbose)
    # Django's setup creates the worker's database WITH TEMPLATE this (postgresql's sql_table_creation_suffix).
    connection.settings_dict["TEST"]["TEMPLATE"] = template


def template_migrated(connection, *, verbosity: int) -> str:
    """The name of this run's migrated template database, which the first worker to get here creates."""
    from tests.parallel import WORKER, _run_folder

    own = connection.settings_dict["TEST"]["NAME"]  # test_<name>_gw0, given by pytest-django's xdist suffix
    run_id = os.environ["PYTEST_XDIST_TESTRUNUID"][:12]  # a crashed run's template has another name
    template = f"{own.removesuffix(f'_{WORKER}')[: 63 - len('_tpl_') - len(run_id)]}_tpl_{run_id}"
    folder = _run_folder()
    with open(folder / "db-template.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait here until it is migrated
        ready = folder / "db-template.ready"
        if not ready.exists():
            (folder / "db-template").write_text(template)  # named before it exists: the run's end drops a half one
            _migrated_as(connection, template, verbosity=verbosity)
            ready.write_text(template)
    return template


def _migrated_as(connection, name: str, *, verbosity: int) -> None:
    """Django's creation of the test database, migrations and all, under another name; the settings are kept."""
    settings = connection.settings_dict  # settings.DATABASES' own, which create_test_db renames to the test's
    kept = settings["NAME"], settings["TEST"]["NAME"]
    settings["TEST"]["NAME"] = name
    try:
        connection.creation.create_test_db(verbosity=verbosity, autoclobber=True, serialize=False)
    finally:
        connection.close()  # CREATE DATABASE ... TEMPLATE refuses a template anyone is connected to
        settings["NAME"], settings["TEST"]["NAME"] = kept


def _database_exists(connection, name: str) -> bool:
    with connection._nodb_cursor() as cursor:
        return connection.creation._database_exists(cursor, name)


@pytest.hookimpl(tryfirst=True)  # before tests/parallel.py removes the run's folder, which names the template
def pytest_unconfigure(config) -> None:
    """At the run's end (the controller, once its workers are done): drop the template its workers migrated."""
    from tests.parallel import WORKER, run_folder_of

    run_id = getattr(config.option, "testrunuid", None)
    named = run_folder_of(run_id) / "db-template" if run_id and not WORKER else None
    if named is None or not named.exists():
        return
    from django.db import connection
    from pytest_django.plugin import blocking_manager_key

    with config.stash[blocking_manager_key].unblock(), connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(named.read_text())} WITH (FORCE)")


@contextlib.contextmanager
def flushed_by_delete(connection) -> Iterator[None]:
    """While in this block, PostgreSQL's flush deletes the rows where it neither resets sequences nor cascades."""
    with pytest.MonkeyPatch.context() as patch:
        if connection.vendor == "postgresql":
            operations = type(connection.ops)
            patch.setattr(operations, "sql_flush", _rows_deleted(operations.sql_flush))
        yield


def _rows_deleted(truncated):
    """PostgreSQL's sql_flush by DELETE; a flush resetting sequences or cascading truncates, as Django's does."""

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade:
            return truncated(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};" for table in tables]

    return sql_flush


def migrated_rows_restored(migrated: str) -> None:
    """Make the tables the migrations filled hold exactly their rows again. After a flush they are empty, or hold the
    content types and permissions that Django's post_migrate made anew (a test without serialized_rollback), with
    other ids: those are replaced, so that a permission's content type is the snapshot's."""
    from django.contrib.contenttypes.models import ContentType
    from django.core import serializers
    from django.db import connection, transaction
    from django.db.models import Model

    rows: dict[type[Model], list[Model]] = {}
    related: dict[Model, dict] = {}
    for found in serializers.deserialize("json", migrated):
        rows.setdefault(type(found.object), []).append(found.object)
        if found.m2m_data:
            related[found.object] = found.m2m_data
    with transaction.atomic(), connection.cursor() as cursor:
        for model in rows:  # foreign keys are checked at the commit (deferred on PostgreSQL and SQLite)
            cursor.execute(f"DELETE FROM {connection.ops.quote_name(model._meta.db_table)}")
        for model, objects in rows.items():
            # bulk_create's own insert, raw as a fixture's load is: the rows keep their times (no auto_now_add).
            fields = model._meta.local_concrete_fields
            size = connection.ops.bulk_batch_size(fields, objects) or len(objects)
            insert = model._base_manager._insert  # type: ignore[attr-defined]
            for start in range(0, len(objects), size):
                insert(objects[start : start + size], fields=fields, raw=True)
        for row, m2m in related.items():
            for name, values in m2m.items():
                getattr(row, name).set(values)
    ContentType.objects.clear_cache()


def emptied_by_flush(item) -> bool:
    """Whether Django flushes the database after this test: pytest-django's rule for a transactional test
    (pytest_django.fixtures._django_db_helper)."""
    from pytest_django.fixtures import validate_django_db

    marker = item.get_closest_marker("django_db")
    if marker:
        transaction, reset_sequences, *_ = validate_django_db(marker)
        if transaction or reset_sequences:
            return True
    return bool({"transactional_db", "live_server"} & set(getattr(item, "fixturenames", ())))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield  # the test's fixtures are torn down: the flush is done
    if nextitem is not None and _migrated is not None and emptied_by_flush(item):
        from pytest_django.plugin import blocking_manager_key

        with item.config.stash[blocking_manager_key].unblock():
            migrated_rows_restored(_migrated)
    return result
