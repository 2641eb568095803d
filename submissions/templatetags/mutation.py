"""A snippet's mutation score as pages show it (submissions/mutants.py makes it)."""

from django import template

from submissions.mutants import OUTCOME_WORDS

register = template.Library()


@register.filter
def mutation_percent(result: dict | None) -> str:
    """ "83%": the killed share of the mutants that count (the equivalent ones never do); "—" when none counts."""
    if not result or result.get("score") is None:
        return "—"
    return f"{result['score']:.0%}"


@register.filter
def mutation_counted(result: dict) -> int:
    """How many mutants the score counts: all but the equivalent ones (a score kept before they were told apart
    counted all)."""
    return int(result.get("counted", result.get("generated", 0)))


@register.filter
def mutation_outcome(mutant: dict) -> str:
    """One mutant's outcome in words: killed by the replay or by the tests, survived, or equivalent."""
    return OUTCOME_WORDS.get((mutant.get("outcome", ""), mutant.get("by", "")), str(mutant.get("outcome", "")))
