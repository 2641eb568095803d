"""Reads of the human baseline: which items a person may be offered, their attempts and results, and a release's
Humans row (pass@1 and scaled pass@1 with bootstrap intervals, people, attempts, minutes), per-item human pass
rates, the score-against-time curve and the people who chose to be listed."""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import OuterRef, QuerySet, Subquery

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion, Snippet, Task
from benchmarks.paper2code.comparison import Interval, percentiles
from benchmarks.paper2code.metrics import EVALUATED
from benchmarks.selectors import tasks_as_released, user_is_maintainer
from evaluation.models import SCORED_STATUS, Outcome
from evaluation.selectors.item_pages import RunItem
from humans.models import Attempt, Listing, ReferenceSeen

BOOTSTRAP_ITERATIONS = 1000
PERSON_ANSWER = "person's answer"  # the diff's name for an attempt's code (a model's is "model's answer")
# Minutes at which the score-against-time view reads the share solved (RE-Bench's curves read it at such marks).
CURVE_MINUTES = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 240, 480)


# The one statement of when a person sees an item's reference (the paper page shows this text; references_seen,
# items_offerable and reference_withheld apply it).
REFERENCE_RULE = (
    "An item is offered to you only while you have not seen its reference here, as a model answers without it, "
    "and never an item of a task you wrote. "
    "While you may still attempt an item of this paper, this page does not show you its reference code (the "
    "annotated files, and the surviving mutants, which spell reference lines); showing it withdraws, for good, the "
    "offer of the paper's items you have not attempted. An attempt's masked file holds the reference of its file's "
    "other items, as a model's prompt does, so opening one withdraws those items, and its result shows the reference "
    "of the items nested in it: opening an item withdraws the other items of its file but those nested in it. "
    "What is public to everyone also holds the references: this page and the items' prompts when not signed in, "
    "a public run's results, the problem-set and Harbor dataset downloads; reading those first is on your honour."
)


def references_seen(*, user) -> dict[int, str]:
    """REFERENCE_RULE: the items whose reference the person has seen on the platform, each with where: the items of
    the tasks they wrote (the paper page never withholds their own reference), the paper page's reference code they
    chose to see, the masked file of their attempt at another item of the same file
    (every item not nested in that one), or the result of their submitted attempt at an item enclosing it."""
    if not user.is_authenticated:
        return {}
    seen: dict[int, str] = {}
    for pk, slug in Snippet.objects.filter(task_id__in=visibility.tasks_written(user=user)).values_list(
        "pk", "task__paper__slug"
    ):
        seen[pk] = f"you wrote the reference code of paper {slug}"
    for pk, slug in Snippet.objects.filter(
        task__in=ReferenceSeen.objects.filter(user=user).values("task_id")
    ).values_list("pk", "task__paper__slug"):
        seen.setdefault(pk, f"you chose to see the reference code of paper {slug}")
    attempts = list(Attempt.objects.filter(user=user).select_related("snippet"))
    siblings: dict[tuple[int, str], list[Snippet]] = {}  # every item of the attempted files, in one query
    for item in Snippet.objects.filter(task_id__in={a.snippet.task_id for a in attempts}).only(
        "pk", "task_id", "file_path", "start_line", "end_line"
    ):
        siblings.setdefault((item.task_id, item.file_path), []).append(item)
    for attempt in attempts:
        mine = attempt.snippet
        for other in siblings.get((mine.task_id, mine.file_path), []):
            if other.pk == mine.pk:
                continue
            nested = other.start_line >= mine.start_line and other.end_line <= mine.end_line
            if not nested:
                where = f"the masked file of your attempt {attempt.pk} at item {mine.pk} holds its reference"
            elif attempt.state == Attempt.State.SUBMITTED:
                where = f"the result of your attempt {attempt.pk} at item {mine.pk}, which encloses it, shows it"
            else:
                continue
            seen.setdefault(other.pk, where)
    return seen


def attempts_revealed_by(*, user, snippet: Snippet) -> Attempt | None:
    """A live attempt of the person whose item's reference `snippet`'s masked file would show (REFERENCE_RULE): an
    item of the same file not nested in it (the masked file holds every other body), e.g. one enclosing it."""
    for attempt in Attempt.objects.filter(
        user=user,
        state__in=(Attempt.State.OPEN, Attempt.State.PAUSED),
        snippet__task_id=snippet.task_id,
        snippet__file_path=snippet.file_path,
    ).select_related("snippet"):
        other = attempt.snippet
        nested = other.start_line >= snippet.start_line and other.end_line <= snippet.end_line
        if other.pk != snippet.pk and not nested:
            return attempt
    return None


def items_offerable(*, version: BenchmarkVersion, user, seen: dict[int, str] | None = None) -> QuerySet[Snippet]:
    """The public items of the release the person has neither attempted nor seen the reference of (REFERENCE_RULE):
    held-out items are offered to no one. `seen`: references_seen's answer, when the caller has it."""
    seen = references_seen(user=user) if seen is None else seen
    return (
        visibility.items_public(version=version)
        .exclude(pk__in=Attempt.objects.filter(user=user).values("snippet_id"))
        .exclude(pk__in=list(seen))
    )


def task_items_open_to(*, task: Task, user, seen: dict[int, str] | None = None) -> QuerySet[Snippet]:
    """The task's items public in a published release that the person may still attempt or is attempting: not
    submitted or abandoned, and their reference not seen (an open attempt's own item is not seen by opening it)."""
    published = BenchmarkVersion.objects.filter(status=BenchmarkVersion.Status.PUBLISHED, tasks=task)
    public = {
        pk
        for v in published
        for pk in visibility.items_public(version=v).filter(task=task).values_list("pk", flat=True)
    }
    finished = Attempt.objects.filter(user=user, state__in=[Attempt.State.SUBMITTED, Attempt.State.ABANDONED])
    seen = references_seen(user=user) if seen is None else seen
    return Snippet.objects.filter(pk__in=public - set(seen)).exclude(pk__in=finished.values("snippet_id"))


def reference_withheld(*, task: Task, user, seen: dict[int, str] | None = None) -> bool:
    """REFERENCE_RULE: whether a paper page keeps the task's reference code from this signed-in person (never from
    its author: they wrote it, so references_seen counts its items as seen)."""
    if not user.is_authenticated or ReferenceSeen.objects.filter(user=user, task=task).exists():
        return False
    return task_items_open_to(task=task, user=user, seen=seen).exists()


@dataclass(frozen=True)
class MyAttempt:
    """A person's own attempt at an item as their paper page shows it: its state and, once scored, the verdict."""

    pk: int
    state: str
    verdict: str | None
    excluded: bool


def attempts_mine_on_task(*, task: Task, user) -> dict[int, MyAttempt]:
    """The person's attempts at the task's items, by item id (empty for a visitor)."""
    if not user.is_authenticated:
        return {}
    verdict = Outcome.objects.filter(run_id=OuterRef("run_id")).order_by("sample").values("status")[:1]
    rows = (
        Attempt.objects.filter(user=user, snippet__task=task)
        .annotate(verdict=Subquery(verdict))
        .values_list("pk", "snippet_id", "state", "verdict", "excluded_reason")
    )
    return {item: MyAttempt(pk, state, verdict, bool(excluded)) for pk, item, state, verdict, excluded in rows}


def item_public(*, version: BenchmarkVersion, snippet_id: int) -> Snippet | None:
    """The release's public item of that id, or None (held out, retired, another release's, or none at all)."""
    return visibility.items_public(version=version).filter(pk=snippet_id).first()


def attempt_get(*, pk: int, user) -> Attempt | None:
    """An attempt its own person (or a maintainer) may see; None for anyone else: results are private."""
    attempt = Attempt.objects.select_related("version", "snippet__task__paper", "run", "user").filter(pk=pk).first()
    if attempt is None or not (attempt.user_id == getattr(user, "pk", None) or user_is_maintainer(user=user)):
        return None
    tasks_as_released(version=attempt.version, tasks=[attempt.snippet.task])
    return attempt


def attempt_outcome(*, attempt: Attempt) -> Outcome | None:
    """The verdict of a submitted attempt's answer, once the pipeline recorded it."""
    if attempt.run_id is None:
        return None
    return (
        Outcome.objects.filter(run_id=attempt.run_id)
        .select_related("snippet__task__paper", "generation")
        .order_by("sample")
        .first()
    )


def attempt_result(*, attempt: Attempt) -> RunItem | None:
    """The attempt's item as a model's item page shows it (verdict, per-test results, the reference diff: attempts
    are on public items only), or None while it is being scored."""
    outcome = attempt_outcome(attempt=attempt)
    if outcome is None:
        return None
    return RunItem(outcome=outcome, show_reference=True, answer_label=PERSON_ANSWER)


def attempts_of(*, user) -> list[Attempt]:
    """The person's attempts, each with its verdict (`verdict`, None while scored or not submitted)."""
    verdict = Outcome.objects.filter(run_id=OuterRef("run_id")).order_by("sample").values("status")[:1]
    return list(
        Attempt.objects.filter(user=user)
        .annotate(verdict=Subquery(verdict))
        .select_related("version", "snippet__task__paper", "run")
    )


@dataclass(frozen=True)
class ScoredAttempt:
    user_id: int
    snippet_id: int
    loc: int
    passed: bool
    minutes: float


def scored_attempts(*, version: BenchmarkVersion) -> tuple[list[ScoredAttempt], dict[str, int]]:
    """The release's scored attempts (submitted, not excluded, verdict passed, failed or flagged: a flag is scored as
    not passed, as a model's) on its public items, and counts: being scored, flagged (among the scored), errors,
    excluded, fast pastes."""
    public = visibility.items_public(version=version).values("pk")
    rows = list(
        Attempt.objects.filter(state=Attempt.State.SUBMITTED, snippet__in=public).values_list(
            "user_id", "snippet_id", "snippet__loc", "active_seconds", "excluded_reason", "fast_paste", "run_id"
        )
    )
    outcomes = Outcome.objects.filter(run_id__in=[r[6] for r in rows if r[6]]).annotate(scored=SCORED_STATUS)
    verdicts = dict(outcomes.values_list("run_id", "scored"))
    counts = {"pending": 0, "flagged": 0, "errors": 0, "excluded": 0, "fast_paste": 0}
    scored = []
    for user_id, snippet_id, loc, seconds, excluded, fast, run_id in rows:
        counts["fast_paste"] += fast
        if excluded:
            counts["excluded"] += 1
            continue
        status = verdicts.get(run_id)
        if status is None:
            counts["pending"] += 1
        elif status not in EVALUATED:
            counts["errors"] += 1
        else:
            if status == Outcome.Status.FLAGGED:  # scored as not passed until a maintainer clears it, as a model's
                counts["flagged"] += 1
            scored.append(ScoredAttempt(user_id, snippet_id, loc, status == Outcome.Status.PASSED, (seconds or 0) / 60))
    return scored, counts


@dataclass(frozen=True)
class ItemRate:
    """People on one item: how many were scored on it and how many passed; thin under HUMAN_THIN_PEOPLE people."""

    people: int
    passed: int
    thin: bool

    @property
    def share(self) -> float:
        return 100.0 * self.passed / self.people if self.people else 0.0


@dataclass
class HumansRow:
    """A release's Humans row: self-reported, over the items people attempted (not the whole release)."""

    people: int = 0
    attempts: int = 0
    items: int = 0
    pass_rate: float = 0.0
    pass_ci: Interval | None = None  # None: fewer items than interval_min_items, too few to resample
    scaled_pass_rate: float = 0.0
    scaled_ci: Interval | None = None
    interval_min_items: int = 0
    median_minutes: float | None = None
    thin_items: int = 0
    thin_people: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    per_item: dict[int, ItemRate] = field(default_factory=dict)


def _rates(items: list[tuple[int, float]]) -> tuple[float, float]:
    """(pass@1, scaled pass@1) in percent from (loc, item pass share) pairs."""
    if not items:
        return 0.0, 0.0
    plain = 100.0 * sum(p for _, p in items) / len(items)
    scaled = 100.0 * sum(loc * p for loc, p in items) / (sum(loc for loc, _ in items) or 1)
    return plain, scaled


def humans_row(*, version: BenchmarkVersion, iterations: int = BOOTSTRAP_ITERATIONS, seed: int = 0) -> HumansRow:
    """The release's Humans row. Per item, the share of its people who passed; pass@1 is their mean over attempted
    items, scaled pass@1 weights each item by its lines of code (as a model's: FORMAT.md 8), and the 95% intervals
    resample items with replacement (all of an item's people together), given from HUMAN_INTERVAL_MIN_ITEMS items."""
    scored, counts = scored_attempts(version=version)
    thin_limit = settings.HUMAN_THIN_PEOPLE
    by_item: dict[int, list[ScoredAttempt]] = {}
    for attempt in scored:
        by_item.setdefault(attempt.snippet_id, []).append(attempt)
    per_item = {
        pk: ItemRate(people=len(rows), passed=sum(r.passed for r in rows), thin=len(rows) < thin_limit)
        for pk, rows in by_item.items()
    }
    items = [(rows[0].loc, per_item[pk].passed / per_item[pk].people) for pk, rows in by_item.items()]
    plain, scaled = _rates(items)
    # Too few items to resample: no interval rather than a degenerate one.
    interval = len(items) >= settings.HUMAN_INTERVAL_MIN_ITEMS
    rng = random.Random(seed)
    draws = [_rates(rng.choices(items, k=len(items))) for _ in range(iterations if interval else 0)]
    return HumansRow(
        people=len({a.user_id for a in scored}),
        attempts=len(scored),
        items=len(items),
        pass_rate=plain,
        pass_ci=percentiles([d[0] for d in draws]) if interval else None,
        scaled_pass_rate=scaled,
        scaled_ci=percentiles([d[1] for d in draws]) if interval else None,
        interval_min_items=settings.HUMAN_INTERVAL_MIN_ITEMS,
        median_minutes=statistics.median(a.minutes for a in scored) if scored else None,
        thin_items=sum(rate.thin for rate in per_item.values()),
        thin_people=thin_limit,
        counts=counts,
        per_item=per_item,
    )


@dataclass(frozen=True)
class CurvePoint:
    minutes: int
    solved: int
    share: float


def time_curve(*, version: BenchmarkVersion) -> tuple[list[CurvePoint], int]:
    """Score against time: at each mark, the share of scored attempts that passed within that many minutes of
    working time; and how many attempts the shares are of."""
    scored, _ = scored_attempts(version=version)
    if not scored:
        return [], 0
    longest = max(a.minutes for a in scored)
    marks = [m for m in CURVE_MINUTES if m < longest] + [next((m for m in CURVE_MINUTES if m >= longest), 480)]
    return [
        CurvePoint(
            minutes=m,
            solved=(n := sum(a.passed and a.minutes <= m for a in scored)),
            share=100.0 * n / len(scored),
        )
        for m in marks
    ], len(scored)


@dataclass(frozen=True)
class ListedPerson:
    name: str
    attempts: int
    passed: int
    median_minutes: float


def people_listed(*, version: BenchmarkVersion) -> list[ListedPerson]:
    """Those who chose to be listed, with their scored attempts on the release; everyone else stays private."""
    scored, _ = scored_attempts(version=version)
    listed = dict(
        Listing.objects.filter(listed=True, user__in={a.user_id for a in scored}).values_list(
            "user_id", "user__username"
        )
    )
    people = []
    for user_id, name in listed.items():
        mine = [a for a in scored if a.user_id == user_id]
        people.append(
            ListedPerson(
                name=name,
                attempts=len(mine),
                passed=sum(a.passed for a in mine),
                median_minutes=statistics.median(a.minutes for a in mine),
            )
        )
    return sorted(people, key=lambda p: (-p.passed / p.attempts, p.name))


def user_listed(*, user) -> bool:
    return Listing.objects.filter(user=user, listed=True).exists() if user.is_authenticated else False


def attempts_for_review(*, version: BenchmarkVersion) -> list[Attempt]:
    """Every submitted attempt of the release with its verdict (`verdict`, None while scored), for maintainers:
    fast pastes first, then newest."""
    verdict = Outcome.objects.filter(run_id=OuterRef("run_id")).order_by("sample").values("status")[:1]
    return list(
        Attempt.objects.filter(version=version, state=Attempt.State.SUBMITTED)
        .annotate(verdict=Subquery(verdict))
        .select_related("user", "snippet__task__paper", "excluded_by")
        .order_by("-fast_paste", "-ended_at")
    )
