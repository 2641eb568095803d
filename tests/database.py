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
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

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
