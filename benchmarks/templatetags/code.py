"""The `highlight` filter: `{{ text|highlight }}` (Python), `{{ text|highlight:"diff" }}` or by a file's name."""

from django import template

from common.highlight import code_html

register = template.Library()


@register.filter
def highlight(value: str, language: str = "python"):
    return code_html(value or "", language)
