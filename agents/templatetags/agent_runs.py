"""The item page's agent transcript (an include that reads the item's trajectory, so the item view stays as is)."""

from __future__ import annotations

import json
import posixpath

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents.budget import BUDGETS, amount_text, budget_text
from agents.selectors import STEP_FOLD_CHARS, answer_against_start, trajectory_of
from common.highlight import code_html

register = template.Library()

# A tool argument that is code, and how to read it: file contents by the file's name, a command as shell.
CODE_ARGUMENTS = {"content", "old_string", "new_string"}
COMMAND_ARGUMENTS = {"command"}


@register.inclusion_tag("agents/_trajectory.html")
def agent_trajectory(run, outcome) -> dict:
    trajectory = trajectory_of(outcome=outcome) if run.mode == "agent" else None
    return {
        "run": run,
        "outcome": outcome,
        "trajectory": trajectory,
        "fold": STEP_FOLD_CHARS,
        "answer_diff": answer_against_start(outcome=outcome) if trajectory else "",
    }


@register.filter(name="budget_text")
def budget_text_filter(budget: dict | None) -> str:
    return budget_text(budget)


@register.filter
def left_text(left: dict | None) -> str:
    """What a step left of each budget it gives: "7 turns, 12,000 tokens, 540 s, $0.25" (cost unavailable once a
    price was unknown)."""
    left = left or {}
    return ", ".join(amount_text(name, left[name]) for name in BUDGETS if name in left)


@register.filter
def tool_arguments(arguments: str) -> SafeString:
    """A tool call's arguments as the model sent them: each named argument on its own, code highlighted (file
    contents by the file's name, a command as shell); arguments that are not a JSON object are shown as sent."""
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError):
        parsed = None
    if not isinstance(parsed, dict):
        return format_html('<pre class="transcript-text">{}</pre>', arguments)
    path = parsed.get("path")
    name = posixpath.basename(path) if isinstance(path, str) else ""
    language = name if "." in name else "text"

    def shown(name: str, value: object) -> SafeString:
        if isinstance(value, str) and name in CODE_ARGUMENTS:
            return code_html(value, language)
        if isinstance(value, str) and name in COMMAND_ARGUMENTS:
            return code_html(value, "bash")
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return format_html("<code>{}</code>", text)

    return format_html(
        '<dl class="tool-arguments">{}</dl>',
        format_html_join("", "<dt>{}</dt><dd>{}</dd>", ((name, shown(name, value)) for name, value in parsed.items())),
    )
