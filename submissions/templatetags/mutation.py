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


@register.filter
def validation_badge(validation, summaries) -> tuple[str, str]:
    """A set validation's status as its heading shows it: passed with a paper's warning (a mutation score below the
    minimum) reads "Passed with warnings" in the warning colour, never a green Passed (as each paper's badge)."""
    if validation.status == "passed" and any(paper.warnings for paper in summaries or ()):
        return "warning", "Passed with warnings"
    return validation.status, validation.get_status_display()
