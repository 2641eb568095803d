"""Pass rate, LoC-scaled pass rate and pass@k over evaluated snippets (FORMAT.md 8)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from math import prod
from typing import Literal, cast, get_args

Status = Literal["passed", "failed", "error", "flagged"]
# These are rated. A flagged item (awaiting a maintainer's review) counts as not passed: were it left out, a model could
# take every item it cannot solve out of its own denominator by flagging it. Errors (infrastructure) are never rated.
EVALUATED = ("passed", "failed", "flagged")


def item_status(value: str) -> Status:
    """`value` (an outcome's stored status) as a Status; any other text is refused, never scored as something."""
    if value not in get_args(Status):
        raise ValueError(f"an item's status is one of {', '.join(get_args(Status))}, not {value!r}")
    return cast(Status, value)


@dataclass(frozen=True)
class ItemResult:
    """The outcome of one sample of one snippet; "error": it could not be evaluated, "flagged": under review (not
    passed until a maintainer clears it)."""

    snippet_id: str
    loc: int
    sample: int
    status: Status


@dataclass(frozen=True)
class Score:
    """Rates in percent: the mean and population std over sample indices; counts over all samples."""

    items: int
    samples: int
    pass_rate: float
    scaled_pass_rate: float
    pass_rate_std: float
    scaled_pass_rate_std: float
    passed: int
    failed: int
    errors: int
    flagged: int = 0


def _percent(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def score(results: Iterable[ItemResult]) -> Score:
    """Score results, leaving errors out of every rate (never counted for or against a model); a flagged item counts
    as not passed.

    A sample index where every result is an error has nothing to rate and is left out of the
    means; a sample whose evaluated snippets total 0 LoC has a scaled pass rate of 0.
    """
    results = list(results)
    by_sample: dict[int, list[ItemResult]] = {}
    for r in results:
        by_sample.setdefault(r.sample, []).append(r)
    rates: list[float] = []
    scaled: list[float] = []
    for sample_results in by_sample.values():
        evaluated = [r for r in sample_results if r.status in EVALUATED]
        if not evaluated:
            continue
        passed = [r for r in evaluated if r.status == "passed"]
        rates.append(_percent(len(passed), len(evaluated)))
        scaled.append(_percent(sum(r.loc for r in passed), sum(r.loc for r in evaluated)))
    return Score(
        items=len({r.snippet_id for r in results}),
        samples=len(by_sample),
        pass_rate=statistics.fmean(rates) if rates else 0.0,
        scaled_pass_rate=statistics.fmean(scaled) if scaled else 0.0,
        pass_rate_std=statistics.pstdev(rates) if rates else 0.0,
        scaled_pass_rate_std=statistics.pstdev(scaled) if scaled else 0.0,
        passed=sum(r.status == "passed" for r in results),
        failed=sum(r.status == "failed" for r in results),
        errors=sum(r.status == "error" for r in results),
        flagged=sum(r.status == "flagged" for r in results),
    )


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct: 1 - C(n-c, k) / C(n, k), as a stable product."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - prod(1.0 - k / i for i in range(n - c + 1, n + 1))
