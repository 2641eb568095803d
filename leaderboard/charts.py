"""The leaderboard's charts: the ranking bars, the score over time, and cost against score as a server-rendered SVG."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from leaderboard.selectors.table import LeaderboardRow


def leaderboard_ranking_chart(*, rows: list[LeaderboardRow]) -> list[dict]:
    """The bar chart's bars: every row's scaled pass@1 with its interval, best first."""
    return [
        {
            "label": f"{r.run.model.display_name} ({'reference line' if r.calibration else r.setting})",
            "value": r.score.scaled_pass_rate,
            "low": r.score.scaled_ci_low,
            "high": r.score.scaled_ci_high,
        }
        for r in sorted(rows, key=lambda r: -r.score.scaled_pass_rate)
    ]


def leaderboard_over_time(*, rows: list[LeaderboardRow]) -> dict:
    """The score-over-time chart's points: each ranked row's scaled pass@1 (with its interval) at its model's
    knowledge cut-off, oldest first; rows whose cut-off is unknown are counted, not drawn."""
    dated = [(r, cutoff) for r in rows if not r.calibration and (cutoff := r.run.model.knowledge_cutoff)]
    points = [
        {
            "label": f"{r.run.model.display_name} ({r.setting})",
            "date": cutoff.isoformat(),
            "value": r.score.scaled_pass_rate,
            "low": r.score.scaled_ci_low,
            "high": r.score.scaled_ci_high,
            "provenance": r.run.provenance,
        }
        for r, cutoff in sorted(dated, key=lambda pair: (pair[1], -pair[0].score.scaled_pass_rate))
    ]
    return {"points": points, "undated": sum(1 for r in rows if not r.calibration) - len(points)}


# The cost-against-score view: a server-rendered SVG (no script needed), its numbers also given as a table.
SCATTER_WIDTH, SCATTER_HEIGHT = 640, 360
SCATTER_MARGIN = {"left": 64, "right": 24, "top": 16, "bottom": 48}


@dataclass(frozen=True)
class CostPoint:
    row: LeaderboardRow
    cost: Decimal  # USD per item (a repeat group's mean)
    score: float  # scaled pass@1 (a repeat group's mean)
    x: float = 0.0
    y: float = 0.0
    pareto: bool = False  # no other row is as cheap or cheaper and scores as high or higher

    @property
    def label(self) -> str:
        return f"{self.row.run.model.display_name} ({self.row.setting})"

    @property
    def label_anchor(self) -> str:
        """A label runs rightwards where it fits, else leftwards where it fits, else towards the wider side (and is
        shortened there): it stays inside the drawing, whose every label a phone shows scaled down, never cut."""
        right, left = SCATTER_WIDTH - self.x - 8, self.x - 8
        if _label_width(self.label) <= right:
            return "start"
        return "end" if _label_width(self.label) <= left or left > right else "start"

    @property
    def label_x(self) -> float:
        return self.x - 8 if self.label_anchor == "end" else self.x + 8

    @property
    def label_text(self) -> str:
        """The label as drawn: whole where it fits, else shortened with an ellipsis (its title has it whole)."""
        room = self.x - 8 if self.label_anchor == "end" else SCATTER_WIDTH - self.x - 8
        if _label_width(self.label) <= room:
            return self.label
        return self.label[: max(1, int(room / SCATTER_CHAR_WIDTH) - 1)].rstrip() + "…"


SCATTER_CHAR_WIDTH = 6.6  # a generous mean advance of an 11 px sans-serif character, in the drawing's units


def _label_width(text: str) -> float:
    return len(text) * SCATTER_CHAR_WIDTH


def _pareto(points: list[CostPoint]) -> set[int]:
    """Indexes of the points no other point dominates (cheaper or as cheap, and better or as good, one strictly)."""
    return {
        i
        for i, p in enumerate(points)
        if not any(
            q.cost <= p.cost and q.score >= p.score and (q.cost < p.cost or q.score > p.score)
            for j, q in enumerate(points)
            if j != i
        )
    }


def leaderboard_cost_scatter(*, rows: list[LeaderboardRow]) -> dict:
    """Each ranked row with a known cost as a point: cost per item (x; a log scale when the costs are all above 0
    and span more than a factor of 10) against scaled pass@1 (y), with the Pareto front marked; rows whose cost is
    unavailable are counted, not drawn."""
    ranked = [r for r in rows if not r.calibration]
    points = [
        CostPoint(row=r, cost=r.cost_per_item, score=r.scaled_mean) for r in ranked if r.cost_per_item is not None
    ]
    left, top = SCATTER_MARGIN["left"], SCATTER_MARGIN["top"]
    inner_w = SCATTER_WIDTH - left - SCATTER_MARGIN["right"]
    inner_h = SCATTER_HEIGHT - top - SCATTER_MARGIN["bottom"]
    costs = [float(p.cost) for p in points]
    log = bool(costs) and min(costs) > 0 and max(costs) / min(costs) > 10
    if log:
        low, high = math.floor(math.log10(min(costs))), math.ceil(math.log10(max(costs)))
        high = high if high > low else low + 1
        ticks = [10.0**e for e in range(low, high + 1)]

        def position(cost: float) -> float:
            return (math.log10(cost) - low) / (high - low)

    else:
        top_cost = max(costs, default=0.0) or 1.0
        ticks = [top_cost * i / 4 for i in range(5)]

        def position(cost: float) -> float:
            return cost / top_cost

    front = _pareto(points)
    placed = [
        CostPoint(
            row=p.row,
            cost=p.cost,
            score=p.score,
            x=round(left + inner_w * position(float(p.cost)), 1),
            y=round(top + inner_h * (1 - p.score / 100), 1),
            pareto=i in front,
        )
        for i, p in enumerate(points)
    ]
    on_front = sorted((p for p in placed if p.pareto), key=lambda p: p.x)
    return {
        "points": placed,
        "front": " ".join(f"{p.x},{p.y}" for p in on_front),
        "unavailable": len(ranked) - len(points),
        "log": log,
        "x_ticks": [{"x": round(left + inner_w * position(t), 1), "cost": t} for t in ticks],
        "y_ticks": [{"y": round(top + inner_h * (1 - v / 100), 1), "value": v} for v in (0, 25, 50, 75, 100)],
        "width": SCATTER_WIDTH,
        "height": SCATTER_HEIGHT,
        "left": left,
        "right": SCATTER_WIDTH - SCATTER_MARGIN["right"],
        "top": top,
        "bottom": top + inner_h,
    }
