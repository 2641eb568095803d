"""Page times of the leaderboard analyses (ranks with ties, failure categories, item difficulty) at 50 models x
1,000 items against a small release (5 models x 50 items) in the same run, with each page's query count.

Runs on its own SQLite database in a temporary folder (nothing shared is touched):
`python scripts/bench_analysis.py [models] [items] [--repeat N]`. The data is bulk-created (outcomes and the stored
split scores the pages read), as the query-bound test builds it (`leaderboard_world`).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAPERS = 20
CATEGORIES = ("syntax", "name_import", "runtime", "wrong_result", "timeout", "memory")


def leaderboard_world(*, name: str, models: int, items: int, held_out_papers: int = 2, seed: int = 0):
    """A published release of `items` snippets over PAPERS papers (the last `held_out_papers` held out) and one
    completed run per model with an outcome per item and its stored scores, made with bulk inserts."""
    from django.utils import timezone

    from benchmarks.models import BenchmarkVersion, Paper, Snippet, Task, VersionTask
    from evaluation.models import EvaluationRun, ModelEntry, Outcome, RunScore
    from evaluation.scoring import item_statistics

    rng = random.Random(seed)
    now = timezone.now()
    papers = Paper.objects.bulk_create(
        Paper(slug=f"{name}-paper-{p}", title=f"Paper {p} of {name}") for p in range(PAPERS)
    )
    tasks = Task.objects.bulk_create(
        Task(
            paper=paper,
            revision=1,
            content_hash=f"{p:064d}",
            files={},
            paper_path="paper2code_paper.md",
            environment_hash="0" * 64,
        )
        for p, paper in enumerate(papers)
    )
    snippets = Snippet.objects.bulk_create(
        Snippet(
            task=tasks[i % PAPERS],
            file_path="model.py",
            name=f"step {i}",
            position=i,
            start_line=2 * i + 1,
            end_line=2 * i + 2,
            depth=0,
            loc=1 + i % 12,
            code_hash=f"{i:064d}",
            reference_code="pass\n",
        )
        for i in range(items)
    )
    version = BenchmarkVersion.objects.create(name=name, status=BenchmarkVersion.Status.PUBLISHED, published_at=now)
    split = {
        t.pk: VersionTask.Split.HELD_OUT if p >= PAPERS - held_out_papers else VersionTask.Split.PUBLIC
        for p, t in enumerate(tasks)
    }
    VersionTask.objects.bulk_create(VersionTask(version=version, task=t, split=split[t.pk]) for t in tasks)
    entries = ModelEntry.objects.bulk_create(
        ModelEntry(name=f"{name}-model-{m}", display_name=f"Model {m}", litellm_model=f"openai/model-{m}")
        for m in range(models)
    )
    runs = EvaluationRun.objects.bulk_create(
        EvaluationRun(
            model=entry,
            version=version,
            status=EvaluationRun.Status.COMPLETED,
            covers_held_out=m % 2 == 0,
            total_items=items,
            done_items=items,
            started_at=now,
            finished_at=now,
        )
        for m, entry in enumerate(entries)
    )
    scores = []
    for m, run in enumerate(runs):
        skill = (m + 1) / (models + 1)
        rows = []
        for s in snippets:
            if not run.covers_held_out and split[s.task_id] == VersionTask.Split.HELD_OUT:
                continue
            ok = rng.random() < skill
            rows.append((s, "passed" if ok else "failed", "" if ok else rng.choice(CATEGORIES)))
        Outcome.objects.bulk_create(
            (Outcome(run=run, snippet=s, status=status, category=category) for s, status, category in rows),
            batch_size=2000,
        )
        stats = item_statistics(outcomes=[(s.pk, status, c, split[s.task_id]) for s, status, c in rows])
        groups = {
            "": rows,
            "public": [r for r in rows if split[r[0].task_id] == "public"],
            "held_out": [r for r in rows if split[r[0].task_id] == "held_out"],
        }
        for key, group in groups.items():
            if group:
                scores.append(_score(run, group, paper=None, split=key, **stats.get(key, {})))
        for task in tasks:
            group = [r for r in rows if r[0].task_id == task.pk]
            if group:
                scores.append(_score(run, group, paper=task.paper, split=""))
    RunScore.objects.bulk_create(scores, batch_size=2000)
    return version


def _score(run, rows, *, paper, split, item_passes=None, categories=None):
    from evaluation.models import RunScore

    passed = sum(status == "passed" for _, status, _ in rows)
    loc = sum(s.loc for s, _, _ in rows)
    scaled = 100.0 * sum(s.loc for s, status, _ in rows if status == "passed") / loc
    rate = 100.0 * passed / len(rows)
    return RunScore(
        run=run,
        paper=paper,
        split=split,
        items=len(rows),
        passed=passed,
        failed=len(rows) - passed,
        errors=0,
        pass_rate=rate,
        pass_rate_std=0,
        scaled_pass_rate=scaled,
        scaled_pass_rate_std=0,
        scaled_ci_low=max(0.0, scaled - 3),
        scaled_ci_high=min(100.0, scaled + 3),
        pass_rate_ci_low=max(0.0, rate - 3),
        pass_rate_ci_high=min(100.0, rate + 3),
        item_passes=item_passes or {},
        categories=categories or {},
    )


def pages(version) -> dict[str, str]:
    """The analysis pages of a release, by label."""
    from django.urls import reverse

    paper = version.tasks.order_by("paper__slug").first().paper.slug
    board = reverse("leaderboard", args=[version.name])
    return {
        "leaderboard": board,
        "leaderboard failures tab": board + "?view=failures",
        "leaderboard sorted by score": board + "?sort=score&dir=asc",
        "difficulty page": reverse("release-difficulty", args=[version.name]),
        "paper page": reverse("paper-detail", args=[version.name, paper]),
        "API leaderboard": reverse("api-leaderboard", args=[version.name]),
        "API difficulty": reverse("api-difficulty", args=[version.name]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="?", type=int, default=50)
    parser.add_argument("items", nargs="?", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from scripts.bench_django import django_fresh

    django_fresh("bench-analysis-")
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client

    start = time.perf_counter()
    small = leaderboard_world(name="small", models=5, items=50)
    large = leaderboard_world(name="large", models=args.models, items=args.items, seed=1)
    print(f"built 5 x 50 and {args.models} x {args.items} in {time.perf_counter() - start:.1f} s")
    client = Client()

    def measure(url: str) -> tuple[float, float, int]:
        """(cold seconds: ranks not cached yet, warm median seconds, queries of the cold request)."""
        executed = []

        def count(execute, sql, params, many, context):
            executed.append(sql)
            return execute(sql, params, many, context)

        # Counted at execution (a request closes its connection, which a query log would not survive).
        cache.clear()
        begin = time.perf_counter()
        with connection.execute_wrapper(count):
            assert client.get(url).status_code == 200, url
        cold = time.perf_counter() - begin
        seconds = []
        for _ in range(args.repeat):
            begin = time.perf_counter()
            client.get(url)
            seconds.append(time.perf_counter() - begin)
        return cold, statistics.median(seconds), len(executed)

    size = f"{args.models} x {args.items}"
    print(
        f"{'page (ms; cold: ranks not cached)':<34} {'5 x 50 cold':>11} {'warm':>6} {'queries':>7} "
        f"{size + ' cold':>15} {'warm':>6} {'queries':>7} {'warm ratio':>10}"
    )
    for (label, small_url), large_url in zip(pages(small).items(), pages(large).values(), strict=False):
        (base_cold, base, base_queries), (big_cold, big, big_queries) = measure(small_url), measure(large_url)
        print(
            f"{label:<34} {base_cold * 1000:>11.1f} {base * 1000:>6.1f} {base_queries:>7} "
            f"{big_cold * 1000:>15.1f} {big * 1000:>6.1f} {big_queries:>7} {big / base:>9.1f}x"
        )


if __name__ == "__main__":
    main()
