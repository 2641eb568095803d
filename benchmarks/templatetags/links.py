"""The `link` filter: a stored URL as an href only when it is http(s), whatever older rows hold."""

from django import template

from benchmarks.paper2code.links import link_problem

register = template.Library()


@register.filter
def link(value: str) -> str:
    return "" if not value or link_problem(value) else value
