"""Selector comparing two runs on one release item by item (issue 12 item 7); the statistics are pure, in
benchmarks.paper2code.comparison."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from benchmarks import visibility
from benchmarks.models import Snippet
from benchmarks.paper2code.comparison import Comparison, PairedItem, compare
from benchmarks.paper2code.metrics import EVALUATED
from evaluation.models import EvaluationRun, Outcome

# A fixed seed: the same pair of runs always gets the same interval.
COMPARISON_SEED = 0


class ComparisonError(ValueError):
    """The two runs cannot be compared (the message says why)."""


@dataclass(frozen=True)
class ItemRow:
    item: int
    paper: str
    file: str
    snippet: str
    loc: int
    a: float  # share of evaluated samples passed, 0..1
    b: float


@dataclass(frozen=True)
class PaperComparison:
    paper: str
    comparison: Comparison


@dataclass(frozen=True)
class RunComparison:
    a: EvaluationRun
    b: EvaluationRun
    overall: Comparison
    papers: list[PaperComparison]
    items: list[ItemRow]
    items_withheld: int  # held-out items counted in `overall` but not listed (non-maintainers)


def _pass_values(run: EvaluationRun) -> dict[int, float]:
    """Per snippet, the share of its scored samples that passed (errors and answers awaiting review are not scored,
    as in scoring and in the leaderboard's ranks)."""
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for snippet_id, status in (Outcome.objects.filter(run=run, status__in=EVALUATED)
                               .values_list("snippet_id", "status")):
        counts[snippet_id][0] += 1
        counts[snippet_id][1] += status == Outcome.Status.PASSED
    return {snippet_id: passed / n for snippet_id, (n, passed) in counts.items()}


def run_comparison(*, a: EvaluationRun, b: EvaluationRun, user) -> RunComparison:
    """Paired statistics over the items both runs evaluated; held-out items only in the release aggregate
    unless the user is a maintainer. Four queries whatever the size."""
    if a.version_id != b.version_id:
        raise ComparisonError(f"runs {a.pk} and {b.pk} are on different releases; compare runs of one release")
    if a.pk == b.pk:
        raise ComparisonError("choose two different runs")
    values_a, values_b = _pass_values(a), _pass_values(b)
    shared = values_a.keys() & values_b.keys()
    visible = set(visibility.tasks_visible(version=a.version, user=user).values_list("pk", flat=True))
    snippets = (Snippet.objects.filter(pk__in=shared)
                .values_list("pk", "loc", "task_id", "task__paper__slug", "file_path", "name")
                .order_by("task__paper__slug", "file_path", "position"))
    paired, rows, withheld = [], [], 0
    by_paper: dict[str, list[PairedItem]] = defaultdict(list)
    for snippet_id, loc, task_id, paper, file_path, name in snippets:
        item = PairedItem(item_id=str(snippet_id), paper_id=paper, loc=loc, a=values_a[snippet_id],
                          b=values_b[snippet_id])
        paired.append(item)
        if task_id in visible:
            by_paper[paper].append(item)
            rows.append(ItemRow(item=snippet_id, paper=paper, file=file_path, snippet=name, loc=loc,
                                a=item.a, b=item.b))
        else:
            withheld += 1
    return RunComparison(
        a=a, b=b, overall=compare(paired, seed=COMPARISON_SEED),
        papers=[PaperComparison(paper=p, comparison=compare(items, seed=COMPARISON_SEED))
                for p, items in sorted(by_paper.items())],
        items=rows, items_withheld=withheld)


def comparison_from_query(*, version, params, user) -> RunComparison:
    """The runs named by ?a= and ?b= (run ids) on the (visible) release, compared; ComparisonError says what is wrong."""
    runs = []
    for key in ("a", "b"):
        value = params.get(key, "")
        if not (value.isascii() and value.isdigit() and len(value) <= 12):
            raise ComparisonError(f"?{key}= must be a run id (a whole number), got {value[:40]!r}")
        run = EvaluationRun.objects.select_related("model", "version").filter(pk=int(value), version=version).first()
        if run is None:
            raise ComparisonError(f"?{key}={value}: no such run on release {version.name}")
        runs.append(run)
    return run_comparison(a=runs[0], b=runs[1], user=user)


def comparison_record(result: RunComparison) -> dict:
    """The comparison as plain data, for the API (the page shows the same numbers)."""
    def stats(c: Comparison) -> dict:
        return {"items": c.items, "difference": c.difference, "ci_low": c.interval.low, "ci_high": c.interval.high,
                "a_only": c.a_only, "b_only": c.b_only, "mcnemar_p": c.p_value}

    return {"release": result.a.version.name,
            "a": {"run": result.a.pk, "model": result.a.model.name, "with_paper": result.a.with_paper},
            "b": {"run": result.b.pk, "model": result.b.model.name, "with_paper": result.b.with_paper},
            "overall": stats(result.overall),
            "papers": [{"paper": p.paper, **stats(p.comparison)} for p in result.papers],
            "items": [{"item": r.item, "paper": r.paper, "file": r.file, "snippet": r.snippet, "loc": r.loc,
                       "a": r.a, "b": r.b} for r in result.items],
            "items_withheld": result.items_withheld}
