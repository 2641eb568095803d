"""Per-item time of the pipeline outside the sandbox: what a worker does around each test run (load the run and
the item, look up the answer, record the outcome, check whether the run is done), in a small and a large run.

Its own SQLite database and media folder in a temporary folder: `python scripts/bench_item_overhead.py`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from scripts.bench_django import django_fresh

    django_fresh("bench-item-", test_environment=False)

    from benchmarks.services.psets import pset_import
    from evaluation import pipeline, services
    from evaluation.models import EvaluationRun, Generation, ModelEntry
    from evaluation.outcomes import Verdict
    from evaluation.selectors.items import run_items

    version = pset_import(root=ROOT / "benchmarks" / "demo", version_name="1.0.0", publish=True).version
    for samples in (1, 20):
        run = services.run_start(
            model=ModelEntry.objects.get(name="reference"), version=version, samples=samples, dispatch=False
        )
        EvaluationRun.objects.filter(pk=run.pk).update(status="running")
        items = run_items(run)
        start = time.perf_counter()
        for snippet_id, sample in items:
            loaded, snippet = pipeline.item(run.pk, snippet_id)
            if loaded is None:
                sys.exit(f"run {run.pk} is gone")
            Generation.objects.filter(run=loaded, snippet=snippet, sample=sample).first()
            services.outcome_record(run=loaded, snippet=snippet, sample=sample, verdict=Verdict("passed", "", ""))
            services.run_maybe_finish(run=loaded)
        elapsed = time.perf_counter() - start
        status = EvaluationRun.objects.get(pk=run.pk).status
        print(
            f"run of {len(items)} items: {1000 * elapsed / len(items):.2f} ms "
            "per item outside the sandbox (storing the scores at the end included); "
            f"run {status}"
        )


if __name__ == "__main__":
    main()
