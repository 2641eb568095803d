"""Per-item time of the pipeline outside the sandbox: what a worker does around each test run (load the run and
the item, look up the answer, record the outcome, check whether the run is done), in a small and a large run.

Its own SQLite database and media folder in a temporary folder: `python scripts/bench_item_overhead.py`.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-item-"))
    os.environ.update({"VAR_DIR": str(tmp), "DJANGO_SETTINGS_MODULE": "config.settings"})
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "MEDIA_ROOT"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.core.management import call_command

    from benchmarks.services import pset_import
    from evaluation import services, tasks
    from evaluation.models import EvaluationRun, Generation, ModelEntry
    from evaluation.outcomes import Verdict
    from evaluation.selectors import run_items

    call_command("migrate", verbosity=0)
    version = pset_import(root=ROOT / "benchmarks" / "demo", version_name="1.0.0", publish=True).version
    for samples in (1, 20):
        run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version, samples=samples,
                                 dispatch=False)
        EvaluationRun.objects.filter(pk=run.pk).update(status="running")
        items = run_items(run)
        start = time.perf_counter()
        for snippet_id, sample in items:
            loaded, snippet = tasks._item(run.pk, snippet_id)
            Generation.objects.filter(run=loaded, snippet=snippet, sample=sample).first()
            services.outcome_record(run=loaded, snippet=snippet, sample=sample, verdict=Verdict("passed", "", ""))
            services.run_maybe_finish(run=loaded)
        elapsed = time.perf_counter() - start
        status = EvaluationRun.objects.get(pk=run.pk).status
        print(f"run of {len(items)} items: {1000 * elapsed / len(items):.2f} ms "
              "per item outside the sandbox (storing the scores at the end included); "
              f"run {status}")


if __name__ == "__main__":
    main()
