"""Selector comparing two runs on one release item by item (issue 12 item 7); the statistics are pure, in
benchmarks.paper2code.comparison."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from benchmarks import visibility
from benchmarks.models import Snippet
from benchmarks.paper2code.comparison import Comparison, PairedItem, compare, passed
from benchmarks.paper2code.metrics import EVALUATED
from evaluation.models import EvaluationRun, Outcome
from leaderboard.errors import ComparisonError

# A fixed seed: the same pair of runs always gets the same interval.
COMPARISON_SEED = 0


@dataclass(frozen=True)
class ItemRow:
    item: int
    paper: str
    file: str
    snippet: str
    loc: int
    a: float  # share of evaluated samples passed, 0..1
    b: float
    a_outcome: int  # each run's first scored outcome of the item: its item page
    b_outcome: int

    @property
    def a_passed(self) -> bool:
        return passed(self.a)

    @property
    def b_passed(self) -> bool:
        return passed(self.b)

    @property
    def disagrees(self) -> bool:
        """One run passes the item and the other does not (McNemar's discordant items)."""
        return self.a_passed != self.b_passed


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
    items: list[ItemRow]  # only the disagreements when disagreements_only
    items_withheld: int  # held-out items counted in `overall` but not listed (non-maintainers)
    disagreements_only: bool = False


def _pass_values(run: EvaluationRun) -> dict[int, tuple[float, int]]:
    """Per snippet, the share of its scored samples that passed (errors are not scored and answers awaiting review
    are not passed, as in scoring and in the leaderboard's ranks) and the outcome of its first scored sample."""
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for snippet_id, status, outcome_id in (
        Outcome.objects.filter(run=run, status__in=EVALUATED)
        .order_by("snippet_id", "sample")
        .values_list("snippet_id", "status", "pk")
    ):
        entry = counts[snippet_id]
        entry[2] = entry[2] or outcome_id
        entry[0] += 1
        entry[1] += status == Outcome.Status.PASSED
    return {snippet_id: (ok / n, outcome_id) for snippet_id, (n, ok, outcome_id) in counts.items()}


def run_comparison(*, a: EvaluationRun, b: EvaluationRun, user, disagreements_only: bool = False) -> RunComparison:
    """Paired statistics over the items both runs evaluated; held-out items only in the release aggregate
    unless the user is a maintainer. The items listed are all visible ones, or only those one run passes and the
    other fails. Four queries whatever the size."""
    if a.version_id != b.version_id:
        raise ComparisonError(f"runs {a.pk} and {b.pk} are on different releases; compare runs of one release")
    if a.pk == b.pk:
        raise ComparisonError("choose two different runs")
    values_a, values_b = _pass_values(a), _pass_values(b)
    shared = values_a.keys() & values_b.keys()
    visible = set(visibility.tasks_visible(version=a.version, user=user).values_list("pk", flat=True))
    snippets = (
        Snippet.objects.filter(pk__in=shared)
        .values_list("pk", "loc", "task_id", "task__paper__slug", "file_path", "name")
        .order_by("task__paper__slug", "file_path", "position")
    )
    paired, rows, withheld = [], [], 0
    by_paper: dict[str, list[PairedItem]] = defaultdict(list)
    for snippet_id, loc, task_id, paper, file_path, name in snippets:
        (value_a, outcome_a), (value_b, outcome_b) = values_a[snippet_id], values_b[snippet_id]
        item = PairedItem(item_id=str(snippet_id), paper_id=paper, loc=loc, a=value_a, b=value_b)
        paired.append(item)
        if task_id in visible:
            by_paper[paper].append(item)
            row = ItemRow(
                item=snippet_id,
                paper=paper,
                file=file_path,
                snippet=name,
                loc=loc,
                a=value_a,
                b=value_b,
                a_outcome=outcome_a,
                b_outcome=outcome_b,
            )
            if row.disagrees or not disagreements_only:
                rows.append(row)
        else:
            withheld += 1
    return RunComparison(
        a=a,
        b=b,
        overall=compare(paired, seed=COMPARISON_SEED),
        papers=[
            PaperComparison(paper=p, comparison=compare(items, seed=COMPARISON_SEED))
            for p, items in sorted(by_paper.items())
        ],
        items=rows,
        items_withheld=withheld,
        disagreements_only=disagreements_only,
    )


# ?items=disagreements lists only the items one run passes and the other fails.
DISAGREEMENTS = "disagreements"


def comparison_from_query(*, version, params, user) -> RunComparison:
    """The runs named by ?a= and ?b= (run ids) on the (visible) release, compared, listing every item or, with
    ?items=disagreements, only the disagreements; ComparisonError says what is wrong."""
    if not params.get("a") and not params.get("b"):  # a bare visit: say what to give, not that '' is no run id
        raise ComparisonError("no runs to compare: ?a= and ?b= give their run ids")
    runs = []
    for key in ("a", "b"):
        value = params.get(key, "")
        if not (value.isascii() and value.isdigit() and len(value) <= 12):
            raise ComparisonError(f"?{key}= must be a run id (a whole number), got {value[:40]!r}")
        run = EvaluationRun.objects.select_related("model", "version").filter(pk=int(value), version=version).first()
        if run is None:
            raise ComparisonError(f"?{key}={value}: no such run on release {version.name}")
        runs.append(run)
    return run_comparison(a=runs[0], b=runs[1], user=user, disagreements_only=params.get("items", "") == DISAGREEMENTS)


def comparison_record(result: RunComparison) -> dict:
    """The comparison as plain data, for the API (the page shows the same numbers)."""

    def stats(c: Comparison) -> dict:
        return {
            "items": c.items,
            "papers": c.papers,
            "difference": c.difference,
            "ci_low": c.interval.low if c.interval else None,
            "ci_high": c.interval.high if c.interval else None,
            "interval_note": c.interval_note,
            "a_only": c.a_only,
            "b_only": c.b_only,
            "mcnemar_p": c.p_value,
        }

    return {
        "release": result.a.version.name,
        "a": {
            "run": result.a.pk,
            "model": result.a.model.name,
            "with_paper": result.a.with_paper,
            "mode": result.a.mode,
        },
        "b": {
            "run": result.b.pk,
            "model": result.b.model.name,
            "with_paper": result.b.with_paper,
            "mode": result.b.mode,
        },
        "overall": stats(result.overall),
        "papers": [{"paper": p.paper, **stats(p.comparison)} for p in result.papers],
        "items": [
            {
                "item": r.item,
                "paper": r.paper,
                "file": r.file,
                "snippet": r.snippet,
                "loc": r.loc,
                "a": r.a,
                "b": r.b,
                "a_outcome": r.a_outcome,
                "b_outcome": r.b_outcome,
            }
            for r in result.items
        ],
        "disagreements_only": result.disagreements_only,
        "items_withheld": result.items_withheld,
    }
