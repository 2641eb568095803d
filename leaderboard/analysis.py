"""Analyses across the models of a leaderboard (issue 12, items 8-10): ranks with ties from paired tests, item
difficulty, failure categories. Each reads the split scores the leaderboard already loaded, where scoring stored
every item's pass share and the answers per outcome category: no page view reads outcomes."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.core.cache import cache

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion, Task
from benchmarks.paper2code.comparison import RANK_ALPHA, passed, significance_ranks
from benchmarks.paper2code.difficulty import Difficulty, item_difficulty
from evaluation.models import Outcome, RunScore
from evaluation.scoring import UNCLASSIFIED

if TYPE_CHECKING:  # selectors imports this module
    from leaderboard.selectors.table import LeaderboardRow

# Item-level aggregates of split scores: large, so the leaderboard defers them and each analysis reads its own.
ITEM_STATISTICS = ("item_passes", "categories")


def item_statistics_load(*, scores: list[RunScore], fields: tuple[str, ...] = ITEM_STATISTICS) -> None:
    """Fill the deferred item statistics of these scores with one query."""
    loaded = {
        pk: values for pk, *values in RunScore.objects.filter(pk__in=[s.pk for s in scores]).values_list("pk", *fields)
    }
    for score in scores:
        for field, value in zip(fields, loaded[score.pk], strict=False):
            setattr(score, field, value)


RANK_METHOD = (
    f"rank = 1 + the number of entries significantly better: an exact McNemar test on the items both "
    f"passed or failed, for every pair of ranked entries, Holm-corrected at a family-wise level of "
    f"{RANK_ALPHA:g}; entries no test separates share a rank"
)


RANK_CACHE_SECONDS = 24 * 3600


def leaderboard_rank(*, version: BenchmarkVersion, rows: Iterable) -> None:
    """Set each row's rank (None: unranked) and rank_note. Calibration lines are never ranked; a run missing a
    scored answer on some item (every sample an infrastructure error) is not compared, since a paired test compares
    runs on the same items; a flag awaiting review scores as not passed, so it does not unrank its run. Verified,
    self-reported and reported runs are ranked together (each row says which it is)."""
    rows = list(rows)
    # Ranks are a function of the stored scores, which rescoring replaces (new ids): cached by ids and counts.
    scored = sorted(
        (r.run.pk, r.score.pk, r.score.items, r.score.passed, r.score.failed, r.score.flagged, r.calibration)
        for r in rows
    )
    key = "ranks:" + hashlib.sha256(repr((version.pk, scored)).encode()).hexdigest()
    cached = cache.get(key)
    if cached is not None:
        for row in rows:
            row.rank, row.rank_note = cached[row.run.pk]
        return
    item_statistics_load(scores=[row.score for row in rows if not row.calibration], fields=("item_passes",))
    entries = {}
    for row in rows:
        row.rank = None
        if row.calibration:
            row.rank_note = "calibration model: a reference line, not ranked"
            continue
        # Items with outcomes but no scored answer: every sample an infrastructure error (a flag scores as not passed).
        missing = row.score.items - len(row.score.item_passes)
        if missing or not row.score.item_passes:
            row.rank_note = (
                f"not ranked: {missing} of {row.score.items} items have no scored answer (infrastructure "
                f"errors; a flagged item counts as not passed), and ranks compare runs on the same items"
            )
            continue
        row.rank_note = ""
        entries[row.run.pk] = row.score.item_passes
    # Complete runs of one release cover the same items; should any not, the largest group is compared.
    groups = Counter(frozenset(passes) for passes in entries.values())
    items = max(groups, key=lambda g: (groups[g], len(g))) if groups else frozenset()
    for row in rows:
        if row.run.pk in entries and entries[row.run.pk].keys() != items:
            row.rank_note = "not ranked: its run covers other items than the ranked runs"
            del entries[row.run.pk]
    ranks = significance_ranks(entries)
    for row in rows:
        if row.run.pk in ranks and not row.calibration:
            row.rank = ranks[row.run.pk]
    cache.set(key, {row.run.pk: (row.rank, row.rank_note) for row in rows}, RANK_CACHE_SECONDS)


@dataclass(frozen=True)
class SnippetRef:
    """What a difficulty table shows of a snippet (read as plain values: hundreds of rows per page)."""

    pk: int
    paper: str  # the paper's id
    file_path: str
    name: str
    loc: int
    mutation: dict | None = None  # its tests' mutation score (issue 24); None: not measured


@dataclass(frozen=True)
class SnippetDifficulty:
    snippet: SnippetRef
    difficulty: Difficulty


def snippet_difficulty(
    *,
    version: BenchmarkVersion,
    rows: Iterable,
    user,
    task: Task | None = None,
) -> list[SnippetDifficulty]:
    """Per item the user may see (of one task, if given): the share of leaderboard entries passing it and the
    point-biserial correlation of passing with the entries' scores, hardest first. Calibration lines are left out
    (they pass everything or nothing by construction)."""
    entries = [row for row in rows if not row.calibration]
    held_out = [row.held_out for row in entries if row.held_out and row.held_out is not row.score]
    if not visibility.user_sees_held_out(user=user):
        held_out = []
    item_statistics_load(scores=[row.score for row in entries] + held_out, fields=("item_passes",))
    passes = [
        {**row.score.item_passes, **(row.held_out.item_passes if row.held_out in held_out else {})} for row in entries
    ]
    scores = [row.score.scaled_pass_rate for row in entries]
    visible = visibility.items_visible(version=version, user=user)
    if task is not None:
        visible = visible.filter(task=task)
    snippets = [
        SnippetRef(*values)
        for values in visible.values_list("pk", "task__paper__slug", "file_path", "name", "loc", "mutation")
    ]
    by_item: dict[str, list[tuple[bool, float]]] = defaultdict(list)
    for item_passes, score in zip(passes, scores, strict=False):
        for key, value in item_passes.items():
            by_item[key].append((passed(value), score))
    result = []
    for snippet in snippets:
        scored = by_item.get(str(snippet.pk))
        if scored:
            result.append(
                SnippetDifficulty(
                    snippet=snippet,
                    difficulty=item_difficulty([ok for ok, _ in scored], [score for _, score in scored]),
                )
            )
    return sorted(result, key=lambda d: (d.difficulty.pass_share, -(d.difficulty.point_biserial or 0.0)))


def difficulty_record(item: SnippetDifficulty) -> dict:
    """One item's difficulty as plain data, for the API and the CSV."""
    s, d = item.snippet, item.difficulty
    return {
        "item": s.pk,
        "paper": s.paper,
        "file": s.file_path,
        "snippet": s.name,
        "loc": s.loc,
        "models": d.models,
        "passed": d.passed,
        "pass_share": d.pass_share,
        "point_biserial": d.point_biserial,
        "mutation_score": s.mutation.get("score") if s.mutation else None,
    }


DIFFICULTY_FIELDS = (
    "item",
    "paper",
    "file",
    "snippet",
    "loc",
    "models",
    "passed",
    "pass_share",
    "point_biserial",
    "mutation_score",
)

# The stacked bar's segments, in the order of the paper's error analysis: passed, then each failure category.
FAILURE_SEGMENTS = (
    ("passed", "Passed"),
    *(
        (c.value, c.label)
        for c in Outcome.Category
        if c not in (Outcome.Category.NONE, Outcome.Category.INFRASTRUCTURE, Outcome.Category.MODEL_CALL)
    ),
    (UNCLASSIFIED, "Failed, not classified (reported results)"),
)


@dataclass(frozen=True)
class FailureRow:
    row: LeaderboardRow
    counts: list[int]  # per FAILURE_SEGMENTS
    total: int

    @property
    def shares(self) -> list[float]:
        return [100.0 * n / self.total if self.total else 0.0 for n in self.counts]


def leaderboard_failures(*, rows: Iterable) -> tuple[list[tuple[str, str]], list[FailureRow]]:
    """Scored answers per outcome category for each row, over the split that ranks it (aggregates, like its
    score); only the segments some row has, so the legend stays short."""
    rows = list(rows)
    item_statistics_load(scores=[row.score for row in rows], fields=("categories",))
    used = [(key, label) for key, label in FAILURE_SEGMENTS if any(row.score.categories.get(key) for row in rows)]
    table = []
    for row in rows:
        counts = [row.score.categories.get(key, 0) for key, _ in used]
        table.append(FailureRow(row=row, counts=counts, total=sum(row.score.categories.values())))
    return used, table
