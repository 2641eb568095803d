"""Django validators over the format library's rules, for model and form fields."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from benchmarks.paper2code.links import link_problem


def link_validate(value: str) -> None:
    """A URL the site renders as a link: absolute http(s) only, so no `javascript:` href ever reaches a page."""
    problem = link_problem(value)
    if problem:
        raise ValidationError(f"%(value)s {problem}", code="invalid", params={"value": repr(value[:100])})
