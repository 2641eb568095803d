"""Time and memory of a 20,000-outcome run's manifest on a fresh table (statistics from before the run), against the
whole-document build of before (`pk__in` over a subquery of the outcomes, every item in a list, one JSON body),
and how long `run_scores_store` holds the run's row lock.

Needs PostgreSQL (the plan at fault is PostgreSQL's): `python scripts/bench_manifest.py [postgres://.../dbname]
[items] [samples]`. The database named is dropped and created again (default: rcb_bench_manifest on 127.0.0.1).
The baseline is given BASELINE_TIMEOUT seconds, then cancelled by the server (statement_timeout).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

URL = sys.argv[1] if len(sys.argv) > 1 else "postgres://postgres@127.0.0.1:5432/rcb_bench_manifest"
ITEMS = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
SAMPLES = int(sys.argv[3]) if len(sys.argv) > 3 else 20
BASELINE_TIMEOUT = 120


def database_fresh(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def baseline_manifest(*, run, user) -> bytes:
    """The manifest as it was built before: pk__in over the visible outcomes, all items in memory, one body."""
    from django.http import JsonResponse

    from common.canonical import canonical_hash, canonical_json
    from evaluation.models import Outcome
    from evaluation.reproducibility import MANIFEST_FORMAT, _sha256, run_outcomes
    from evaluation.selectors.runs import outcomes_visible

    outcomes = list(run_outcomes(run).filter(pk__in=outcomes_visible(run=run, user=user).values("pk")))
    withheld = Outcome.objects.filter(run=run).count() - len(outcomes)
    locks = {o.environment_lock.lock_hash: o.environment_lock.lock for o in outcomes if o.environment_lock}
    items = [
        {
            "item": o.snippet.pk,
            "sample": o.sample,
            "paper": o.snippet.task.paper.slug,
            "file": o.snippet.file_path,
            "snippet": o.snippet.name,
            "task_content_hash": o.snippet.task.content_hash,
            # As the manifest has it: an item without an answer has no answer hashes (the bench's have one each).
            "prompt_hash": o.generation.prompt_hash if o.generation else None,
            "answer_hash": _sha256(o.generation.raw_answer) if o.generation else None,
            "code_hash": _sha256(o.generation.extracted_code) if o.generation else None,
            "environment_hash": o.environment_hash,
            "environment_lock": None,
            "protocol": run.protocol,
            "limits": o.limits,
            "sandbox_backend": o.sandbox_backend,
            "worker": o.worker,
            "verdict": {"status": o.status, "category": o.category},
        }
        for o in outcomes
    ]
    body = {
        "format": MANIFEST_FORMAT,
        "run": {"id": run.pk},
        "scope": "public items only" if withheld else "all",
        "items_withheld": withheld,
        "items": items,
        "environments": locks,
    }
    import json

    body = json.loads(canonical_json(body))
    return JsonResponse({**body, "sha256": canonical_hash(body)}, json_dumps_params={"indent": 1}).content


def measured(label: str, build) -> None:
    tracemalloc.start()
    start = time.perf_counter()
    try:
        size = build()
    except Exception as exc:  # the baseline's statement timeout
        elapsed = time.perf_counter() - start
        tracemalloc.stop()
        print(f"{label}: no answer after {elapsed:.1f} s ({type(exc).__name__}: {str(exc).strip()[:80]})")
        return
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{label}: {size / 1e6:.1f} MB in {elapsed:.2f} s, peak Python memory {peak / 1e6:.1f} MB")


def main() -> None:
    database_fresh(URL)
    tmp = Path(tempfile.mkdtemp(prefix="bench-manifest-"))
    os.environ.update({"VAR_DIR": str(tmp), "DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_URL": URL})
    for name in ("REDIS_URL", "CELERY_BROKER_URL", "MEDIA_ROOT"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction

    call_command("migrate", verbosity=0)
    from benchmarks.selectors import version_snippets
    from benchmarks.services.psets import pset_import
    from evaluation.models import EvaluationRun, Generation, ModelEntry, Outcome
    from evaluation.reproducibility import run_manifest_chunks
    from evaluation.scoring import run_outcomes_state, run_scores_compute, run_scores_store, run_scores_write
    from scripts import bench_upload

    bench_upload.ITEMS = ITEMS
    bench_upload.pset_generate(tmp / "pset")
    version = pset_import(root=tmp / "pset", version_name="1.0.0", publish=True).version
    snippets = list(version_snippets(version=version))
    user = get_user_model().objects.create_user(username="reader", password="x", email="reader@example.org")
    with connection.cursor() as cursor:  # the statistics predate the run, as on a fresh run before autoanalyze
        cursor.execute("ANALYZE")
        for table in ("evaluation_outcome", "evaluation_generation"):
            cursor.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    model = ModelEntry.objects.get(name="reference")
    run = EvaluationRun.objects.create(
        model=model, version=version, samples=SAMPLES, status="running", total_items=len(snippets) * SAMPLES
    )
    generations = Generation.objects.bulk_create(
        [
            Generation(
                run=run,
                snippet=s,
                sample=k,
                prompt_hash="0" * 64,
                raw_answer=f"```python\n{s.reference_code}```",
                extracted_code=s.reference_code,
                latency=0.0,
                cost=0,
            )
            for k in range(SAMPLES)
            for s in snippets
        ],
        batch_size=2000,
    )
    Outcome.objects.bulk_create(
        [
            Outcome(
                run=run,
                snippet_id=g.snippet_id,
                sample=g.sample,
                generation=g,
                status="passed",
                category="",
                duration=0.1,
                limits={"wall_seconds": 60},
                sandbox_backend="bwrap",
                worker="w1@host",
            )
            for g in generations
        ],
        batch_size=2000,
    )
    run.refresh_from_db()
    print(f"run of {run.total_items} outcomes ({len(snippets)} items x {SAMPLES} samples); statistics from before it")

    with connection.cursor() as cursor:
        cursor.execute(f"SET statement_timeout = {BASELINE_TIMEOUT * 1000}")
    measured("manifest before (pk__in subquery, whole body)", lambda: len(baseline_manifest(run=run, user=user)))
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")
    measured(
        "manifest now (run-scoped join, streamed)",
        lambda: sum(len(piece) for piece in run_manifest_chunks(run=run, user=user)),
    )

    # The row lock a finishing run takes: held while its scores are stored.
    start = time.perf_counter()
    with transaction.atomic():
        EvaluationRun.objects.select_for_update().get(pk=run.pk)
        run_scores_store(run=run)
    print(f"row lock held before (scores computed and written under it): {time.perf_counter() - start:.2f} s")
    start = time.perf_counter()
    computed = run_scores_compute(run=run)
    computing = time.perf_counter() - start
    start = time.perf_counter()
    with transaction.atomic():
        EvaluationRun.objects.select_for_update().get(pk=run.pk)
        run_outcomes_state(run=run)
        run_scores_write(run=run, scores=computed)
    print(f"row lock held now: {time.perf_counter() - start:.2f} s (scores computed before it, in {computing:.2f} s)")


if __name__ == "__main__":
    main()
