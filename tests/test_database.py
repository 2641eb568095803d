"""Every test starts with the rows the migrations made, whatever ran before it on its worker (tests/database.py): a
transactional test's flush empties every table, and the rows are put back after it.

The first two tests run in this order, on one worker (a module is one xdist group): the first is a transactional
test like the browser and worker tests (serialized_rollback: its flush leaves even the content types out), the
second needs the rcb-v1 protocol its migration made and has no serialized_rollback to bring it back itself. Without
the restore after the first, the second fails.
"""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection

from benchmarks.models import PromptProtocol
from benchmarks.paper2code import RCB_V1
from evaluation.models import ModelEntry
from tests import database

pytestmark = pytest.mark.django_db(transaction=True)


def _rows() -> set[str]:
    """The rows of the database, each in Django's serialized form."""
    return _each(connection.creation.serialize_db_to_string())


def _migrated() -> set[str]:
    assert database._migrated is not None
    return _each(database._migrated)


def _flush(*, post_migrate: bool) -> None:
    """As Django flushes after a transactional test (TransactionTestCase._fixture_teardown)."""
    call_command("flush", verbosity=0, interactive=False, reset_sequences=False, inhibit_post_migrate=not post_migrate)


def _each(serialized: str) -> set[str]:
    # Django serializes a time to the millisecond and drops a fraction of .000: a row made at 07.000412 restores as
    # 07 exactly, which serializes as "07Z" where the migrated rows said "07.000Z" (about one run in 200).
    whole_second = re.compile(r"(T\d\d:\d\d:\d\d)(Z|[+-]\d\d:\d\d)\"")
    return {whole_second.sub(r'\1.000\2"', json.dumps(row, sort_keys=True)) for row in json.loads(serialized)}


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_transactional_test_commits_and_its_flush_empties_every_table(request, maintainer):
    assert PromptProtocol.objects.filter(name=RCB_V1.name).exists()
    assert database.emptied_by_flush(request.node)


def test_the_next_test_on_the_worker_finds_the_rows_the_migrations_made():
    assert PromptProtocol.objects.get(name=RCB_V1.name).template == RCB_V1.template
    assert set(ModelEntry.objects.values_list("kind", flat=True)) >= {"reference", "placeholder", "human"}
    assert ContentType.objects.get_for_model(PromptProtocol).permission_set.exists()
    assert _rows() == _migrated()


@pytest.mark.parametrize("post_migrate", [False, True], ids=["serialized_rollback", "post_migrate"])
def test_the_rows_a_flush_removed_are_restored_as_migrated(post_migrate):
    """The flush as Django runs it after a transactional test: with serialized_rollback, no post_migrate (every
    table empty); without, post_migrate makes the content types and permissions anew, with other ids."""
    assert _rows() == _migrated()
    _flush(post_migrate=post_migrate)
    assert not PromptProtocol.objects.exists()
    assert not ModelEntry.objects.exists()
    if post_migrate:
        assert Permission.objects.exists() and _rows() != _migrated()

    database.migrated_rows_restored(database._migrated)

    assert _rows() == _migrated()
    assert PromptProtocol.objects.get(name=RCB_V1.name).template == RCB_V1.template
    permission = Permission.objects.get(codename="view_promptprotocol")
    assert permission.content_type == ContentType.objects.get_for_model(PromptProtocol)


def test_the_flush_empties_every_table(author):
    """On PostgreSQL the flush deletes rather than truncates (tests/database.py): still nothing is left."""
    from django.apps import apps
    from django.core.management.color import no_style
    from django.core.management.sql import sql_flush

    if connection.vendor == "postgresql":
        statements = sql_flush(no_style(), connection, reset_sequences=False)
        assert {statement.split(" ")[0] for statement in statements} == {"DELETE"}
    PromptProtocol.objects.create(name="mine", template="{paper}")
    _flush(post_migrate=False)

    assert [model.__name__ for model in apps.get_models() if model._base_manager.exists()] == []
