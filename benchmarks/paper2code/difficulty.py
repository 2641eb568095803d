"""How hard each benchmark item is across models: the share passing it and the point-biserial correlation of
passing it with the models' overall scores (pure: no Django)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def point_biserial(passed: Sequence[bool], scores: Sequence[float]) -> float | None:
    """Pearson correlation of a pass (1) / fail (0) with each model's score: (M1 - M0) / s * sqrt(p q), s the
    population standard deviation of the scores. None where it is undefined: fewer than two models, everyone
    passing or everyone failing, or all scores equal."""
    if len(passed) != len(scores):
        raise ValueError(f"{len(passed)} pass values for {len(scores)} scores")
    n = len(scores)
    ones = [s for p, s in zip(passed, scores, strict=False) if p]
    zeros = [s for p, s in zip(passed, scores, strict=False) if not p]
    if n < 2 or not ones or not zeros:
        return None
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / n)
    if std == 0:
        return None
    share = len(ones) / n
    return (sum(ones) / len(ones) - sum(zeros) / len(zeros)) / std * math.sqrt(share * (1 - share))


@dataclass(frozen=True)
class Difficulty:
    models: int  # models with a scored answer on the item
    passed: int
    pass_share: float  # 0..1
    point_biserial: float | None


def item_difficulty(passed: Sequence[bool], scores: Sequence[float]) -> Difficulty:
    """One item's difficulty from each model's pass and overall score (same order)."""
    return Difficulty(
        models=len(passed),
        passed=sum(passed),
        pass_share=sum(passed) / len(passed) if passed else 0.0,
        point_biserial=point_biserial(passed, scores),
    )
