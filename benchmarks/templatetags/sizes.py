"""The `size` filter: a byte count in the site's one wording (common.sizes), instead of Django's filesizeformat."""

from django import template

from common.sizes import size_text

register = template.Library()


@register.filter
def size(n) -> str:
    try:
        return size_text(float(n))
    except (TypeError, ValueError):
        return ""
