"""Template filters for score display: percentages with intervals and heat-map colours."""

from django import template

register = template.Library()


@register.filter
def heat(value: float | None) -> str:
    """A light background from red (0%) to green (100%), dark text stays readable on every shade."""
    if value is None:
        return "background: #f6f8fa"
    return f"background: hsl({round(1.2 * max(0.0, min(100.0, value)))}, 70%, 82%)"


@register.filter
def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}%"
