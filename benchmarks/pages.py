"""What the apps that build on benchmarks add to its pages: the home page's leaderboard (evaluation), a paper's
difficulty table (evaluation), a draft release's validation section (submissions); and what the apps above
evaluation add to its release pages: the Humans row and per-item human pass rates (humans).

Benchmarks sits below those apps and imports neither; each registers what it shows in its `AppConfig.ready()`, the
way lost work is registered with `operations.watchdog`. A page asks `page_extras(page, ...)` for the context the
others add. Only the Python imports are decoupled: the benchmarks templates still include those apps' partials and
name their URLs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Page name -> the functions adding to its context; each takes the page's keyword arguments and returns a dict.
_EXTRAS: dict[str, list[Callable[..., dict[str, Any]]]] = {}


def page_extra_register(page: str, extra: Callable[..., dict[str, Any]]) -> None:
    """Add `extra(**arguments)`'s keys to every rendering of `page` ("home", "version", "paper", "leaderboard",
    "difficulty", "item")."""
    extras = _EXTRAS.setdefault(page, [])
    if extra not in extras:
        extras.append(extra)


def page_extras(page: str, **arguments: Any) -> dict[str, Any]:
    """The context the other apps add to `page`, called with that page's arguments."""
    context: dict[str, Any] = {}
    for extra in _EXTRAS.get(page, []):
        context.update(extra(**arguments))
    return context
