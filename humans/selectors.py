"""Reads of the human baseline: which items a person may be offered, their attempts and results, and a release's
Humans row (pass@1 and scaled pass@1 with bootstrap intervals, people, attempts, minutes), per-item human pass
rates, the score-against-time curve and the people who chose to be listed."""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import QuerySet

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion, Snippet
from benchmarks.paper2code.comparison import Interval, percentiles
from benchmarks.paper2code.metrics import EVALUATED
from benchmarks.selectors import user_is_maintainer
from evaluation.models import Outcome
from evaluation.selectors import RunItem
from humans.models import Attempt, Listing

BOOTSTRAP_ITERATIONS = 1000
# Minutes at which the score-against-time view reads the share solved (RE-Bench's curves read it at such marks).
CURVE_MINUTES = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 240, 480)


def items_offerable(*, version: BenchmarkVersion, user) -> QuerySet[Snippet]:
    """The public items of the release the person has not attempted: held-out items are offered to no one."""
    return visibility.items_public(version=version).exclude(
        pk__in=Attempt.objects.filter(user=user).values("snippet_id")
    )


def item_public(*, version: BenchmarkVersion, snippet_id: int) -> Snippet | None:
    """The release's public item of that id, or None (held out, retired, another release's, or none at all)."""
    return visibility.items_public(version=version).filter(pk=snippet_id).first()


def attempt_get(*, pk: int, user) -> Attempt | None:
    """An attempt its own person (or a maintainer) may see; None for anyone else: results are private."""
    attempt = Attempt.objects.select_related("version", "snippet__task__paper", "run", "user").filter(pk=pk).first()
    if attempt is None or not (attempt.user_id == getattr(user, "pk", None) or user_is_maintainer(user=user)):
        return None
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
    return RunItem(outcome=outcome, show_reference=True)


def attempts_of(*, user) -> list[Attempt]:
    return list(Attempt.objects.filter(user=user).select_related("version", "snippet__task__paper", "run"))


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
    verdicts = dict(Outcome.objects.filter(run_id__in=[r[6] for r in rows if r[6]]).values_list("run_id", "status"))
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
    pass_ci: Interval = Interval(0.0, 0.0)
    scaled_pass_rate: float = 0.0
    scaled_ci: Interval = Interval(0.0, 0.0)
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
    resample items with replacement (all of an item's people together)."""
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
    rng = random.Random(seed)
    draws = [_rates(rng.choices(items, k=len(items))) for _ in range(iterations if items else 0)]
    return HumansRow(
        people=len({a.user_id for a in scored}),
        attempts=len(scored),
        items=len(items),
        pass_rate=plain,
        pass_ci=percentiles([d[0] for d in draws]),
        scaled_pass_rate=scaled,
        scaled_ci=percentiles([d[1] for d in draws]),
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
    """Every submitted attempt of the release, for maintainers: fast pastes first, then newest."""
    return list(
        Attempt.objects.filter(version=version, state=Attempt.State.SUBMITTED)
        .select_related("user", "snippet__task__paper", "excluded_by")
        .order_by("-fast_paste", "-ended_at")
    )
