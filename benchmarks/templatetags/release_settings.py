"""What a release's settings are when it leaves one to the site: the site's own value, said as a number."""

from django import template
from django.conf import settings

register = template.Library()


@register.simple_tag
def site_mutation_score_min() -> str:
    return f"{settings.MUTATION_SCORE_MIN:.0%}"
