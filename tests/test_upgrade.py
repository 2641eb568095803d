"""Upgrade test: a database filled by an older commit, backed up, restored and migrated by the current code loses
nothing (scripts/upgrade_check.py), from the previous commit and from before the latest migration change."""

from __future__ import annotations

import ast
import shutil
import subprocess

import psycopg
import pytest

from scripts.upgrade_check import db_url, default_pg, main
from tests.conftest import REPO, service_missing


def _git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def _migration_leaves_conflict(ref: str) -> bool:
    """Whether some app has two leaf migrations at `ref`: a commit between a branch's merge and its merge
    migration, which no site ever ran (Django refuses to migrate it)."""
    paths = [
        p
        for p in _git("ls-tree", "-r", "--name-only", ref).splitlines()
        if "/migrations/" in p and p.rsplit("/", 1)[-1][:1].isdigit() and p.endswith(".py")
    ]
    nodes: dict[str, set[str]] = {}
    parents: dict[str, set[str]] = {}
    for path in paths:
        app, name = path.split("/migrations/")[0].rsplit("/", 1)[-1], path.rsplit("/", 1)[-1][:-3]
        nodes.setdefault(app, set()).add(name)
        for node in ast.walk(ast.parse(_git("show", f"{ref}:{path}"))):
            if (
                isinstance(node, ast.Tuple)
                and len(node.elts) == 2
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
            ):
                dep_app, dep = (e.value for e in node.elts)
                if dep_app == app:
                    parents.setdefault(app, set()).add(dep)
    return any(len(names - parents.get(app, set())) > 1 for app, names in nodes.items())


def _old_ref(which: str) -> str:
    if which == "previous-commit":
        ref = "HEAD~1"
    else:
        last_change = _git("log", "-n1", "--format=%H", "--", "*/migrations/*.py")
        ref = f"{last_change}~1" if last_change else ""
        while ref and _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}") and _migration_leaves_conflict(ref):
            ref = f"{ref}~1"  # back along the first parents to a state a site could have run
    if not ref or not _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"):
        service_missing("git history", f"cannot resolve the old commit for {which} ({ref or 'no migration commit'})")
    return ref


@pytest.mark.postgres
@pytest.mark.slow  # 45-65 s each: a checkout's migrations, dump and restore
@pytest.mark.parametrize("which", ["previous-commit", "before-last-migration-change"])
def test_upgrade_loses_no_data(which, sandbox_cache, capsys):
    for tool in ("pg_dump", "pg_restore", "git"):
        if not shutil.which(tool):
            service_missing("PostgreSQL client tools and git", f"{tool} is not on PATH")
    try:
        psycopg.connect(db_url(default_pg(), "postgres"), connect_timeout=2).close()
    except psycopg.OperationalError as exc:
        service_missing("PostgreSQL", f"{default_pg()}: {exc}")
    ref = _old_ref(which)
    if which != "previous-commit" and _git("rev-parse", ref) == _git("rev-parse", "HEAD~1"):
        pytest.skip(f"{ref} is HEAD~1, checked by the previous-commit case")

    status = main(["--from", ref, "--sandbox-cache", str(sandbox_cache)])

    output = capsys.readouterr().out
    assert status == 0, output
    assert "RESULT: no data lost" in output
