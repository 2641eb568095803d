"""What a release's settings are when it leaves one to the site: the site's own value, said as a number."""

from django import template
from django.conf import settings

register = template.Library()


@register.simple_tag
def site_mutation_score_min() -> str:
    return f"{settings.MUTATION_SCORE_MIN:.0%}"


# What the minimum mutation score is, said the same way on every page (walk 38): a warning threshold, never a
# requirement (submissions.validation.mutation_warning warns; no check fails for it).
MUTATION_THRESHOLD_WORDS = "a warning threshold: validation warns below it, never fails a submission for it"


@register.simple_tag
def mutation_threshold_words() -> str:
    return MUTATION_THRESHOLD_WORDS
