"""What a failed test said, as a template filter (`{{ test.detail|failure_said }}`); the rule itself is
`evaluation.outcomes.failure_said`."""

from __future__ import annotations

from django import template

from evaluation.outcomes import failure_said

register = template.Library()
register.filter("failure_said", failure_said)
