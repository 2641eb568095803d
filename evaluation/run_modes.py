"""Run modes beside single-shot, registered by the app that runs them in its `AppConfig.ready()` (the agents app adds
"agent"): what evaluation's services, pages and commands ask of a mode, so that evaluation never imports that app.

Single-shot ("single") is evaluation's own and is not registered; human runs (humans/) are made by their app, never
started or uploaded here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from evaluation.errors import EvaluationError

SINGLE = "single"


@dataclass(frozen=True)
class RunMode:
    name: str
    item_task: str  # the Celery task the feeder queues per item, by name (evaluation/routing.py)
    # (model=, version=, budget=) -> the run's per-item budget; EvaluationError when the model cannot run so.
    settings: Callable[..., dict]
    # (run=, items=) on a resume of a paused run: items (snippet id, sample) whose model call failed start over.
    restart: Callable[..., None]
    # (version=, parse=) -> the parser of one upload line of the mode, around evaluation's `parse`.
    upload_line_parser: Callable[..., Callable]
    uploads_store: Callable[..., Any]  # (run=, rows=): what the mode stores beside an upload's answers
    run_summary: Callable[..., Any]  # (run=, public_only=) -> the run page's summary of the mode's items
    # (release) -> the per-item maximums a run of the release may ask, by name; (name, amount) -> the amount as read.
    budget_maximums: Callable[[Any], dict]
    amount_text: Callable[[str, Any], str]


_MODES: dict[str, RunMode] = {}


def run_mode_register(mode: RunMode) -> None:
    _MODES[mode.name] = mode


def run_mode_get(name: str) -> RunMode | None:
    """The registered mode of that name; None for single-shot (and human) runs."""
    return _MODES.get(name)


def run_mode(name: str) -> RunMode:
    """A registered mode that must be there (its app is installed wherever evaluation runs)."""
    if (mode := _MODES.get(name)) is None:
        raise LookupError(f"run mode {name!r} is not registered: its app's AppConfig.ready() registers it")
    return mode


def run_modes() -> tuple[str, ...]:
    return (SINGLE, *_MODES)


def run_mode_settings(*, model, version, mode: str, budget: dict | None) -> dict:
    """The run's agent budget ({} for a single-shot run); EvaluationError when the mode cannot be run."""
    if mode == SINGLE:
        if budget:
            raise EvaluationError("a budget is for agent runs (mode agent)")
        return {}
    if (registered := _MODES.get(mode)) is None:
        raise EvaluationError(f"mode must be one of {', '.join(run_modes())} (got {mode!r})")
    return registered.settings(model=model, version=version, budget=budget)


def run_mode_restart(*, run, items: Iterable[tuple[int, int]]) -> None:
    if (registered := _MODES.get(run.mode)) is not None:
        registered.restart(run=run, items=items)


def single_line_parse(row, *, parse, **context):
    """A single-shot line; one carrying a trajectory is refused rather than stored without it."""
    if isinstance(row, dict) and "trajectory" in row:
        return 'a "trajectory" is taken in mode "agent" only (this upload is single-shot)'
    return parse(row, **context)


def upload_line_parser(*, mode: str, version, parse):
    """The function that parses one upload line of the mode, around `parse` (services.upload_line_parse), and is
    called as it is."""
    if mode == SINGLE:
        return partial(single_line_parse, parse=parse)
    if (registered := _MODES.get(mode)) is None:
        raise EvaluationError(f"unknown upload mode {mode!r}; modes are {', '.join(run_modes())}")
    return registered.upload_line_parser(version=version, parse=parse)


def uploads_store(*, run, rows) -> None:
    if (registered := _MODES.get(run.mode)) is not None:
        registered.uploads_store(run=run, rows=rows)
