"""What the platform vouches for about a run's answers, decided and worded in one place.

Verified means the platform called a provider at the provider's own address (no api_base), or a calibration model
answered; a run against an owner's own endpoint (api_base) is self-reported, since that endpoint can answer anything,
and so is an upload until a maintainer checks it (a verified upload, which names who checked it and why). The
leaderboard, the run page, the API and the run manifest all say it with `provenance_of`.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.models import EvaluationRun, ModelEntry, ProvenanceChange

Provenance = EvaluationRun.Provenance


@dataclass(frozen=True)
class ProvenanceLabel:
    value: str  # as stored and filtered on (EvaluationRun.Provenance), e.g. "self_reported"
    label: str  # the short word of badges and filters, e.g. "self-reported"
    statement: str  # what exactly the platform vouches for, e.g. "verified upload: checked by maya, ..."

    @property
    def beside_badge(self) -> str:
        """The statement after a badge that already says the label ("checked by maya, ..."): not said twice."""
        return self.statement.removeprefix(f"{self.label}: ")


# What each provenance means in general (the leaderboard's legend, the API's documentation); `provenance_of` says it
# for one run.
PROVENANCE_MEANINGS = {
    Provenance.VERIFIED: "the platform called a provider at the provider's own address, or a calibration model "
    "answered",
    Provenance.VERIFIED_UPLOAD: "uploaded answers a maintainer checked (the statement names who, and why)",
    Provenance.SELF_REPORTED: "answers uploaded and not checked, or fetched from the owner's own endpoint (api_base), "
    "which can answer anything",
    Provenance.REPORTED: "published results imported as published",
}
PROVENANCE_HELP = ", ".join(f"{value} ({meaning})" for value, meaning in PROVENANCE_MEANINGS.items()) + "."


def provenance_at_start(*, model: ModelEntry, api_base: str) -> str:
    """The provenance a run the platform generates gets from its endpoint snapshot."""
    if model.kind in (ModelEntry.Kind.REFERENCE, ModelEntry.Kind.PLACEHOLDER) or not api_base:
        return Provenance.VERIFIED
    return Provenance.SELF_REPORTED


def provenance_choices() -> list[tuple[str, str]]:
    """(value, label) of every provenance, for filters."""
    return [(value, label) for value, label in Provenance.choices]


def provenance_legend() -> list[tuple[str, str]]:
    """(label, meaning) of every provenance, for the leaderboard's legend."""
    return [(Provenance(value).label, meaning) for value, meaning in PROVENANCE_MEANINGS.items()]


def _verification(run: EvaluationRun) -> ProvenanceChange | None:
    # .all() so a prefetch (the leaderboard's) answers without a query per row.
    changes = [c for c in run.provenance_changes.all() if c.to_provenance == Provenance.VERIFIED_UPLOAD]
    return changes[-1] if changes else None


def provenance_of(run: EvaluationRun) -> ProvenanceLabel:
    """The run's provenance in words: its label and the sentence saying what the platform vouches for."""
    value = run.provenance
    label = Provenance(value).label
    if value == Provenance.VERIFIED:
        if run.is_calibration:
            statement = "a built-in calibration model: the platform made its answers"
        else:
            statement = (
                f"the platform called {run.litellm_model or run.model.litellm_model} at the provider's own address"
            )
    elif value == Provenance.VERIFIED_UPLOAD:
        change = _verification(run)
        who = change.actor.get_username() if change and change.actor else "a former maintainer"
        statement = f"checked by {who}, {change.reason}" if change else "checked by a maintainer"
    elif value == Provenance.SELF_REPORTED:
        if run.api_base:
            # Not the address itself: the statement is public, the endpoint its owner's (benchmarks.visibility).
            statement = (
                "the platform called the owner's own endpoint, not a provider's own address: it can answer anything"
            )
        else:
            statement = "answers uploaded by the model's developers, not checked by a maintainer"
    else:
        statement = "published results imported as published" + (f" ({run.source})" if run.source else "")
    return ProvenanceLabel(value=value, label=label, statement=f"{label}: {statement}")


CALIBRATION = "calibration"


def row_provenance(run: EvaluationRun) -> ProvenanceLabel:
    """A leaderboard row's provenance as its badge and every export of the board say it: a calibration model's row
    is a reference line ("calibration", never ranked), any other row its run's provenance."""
    said = provenance_of(run)
    if not run.is_calibration:
        return said
    return ProvenanceLabel(
        value=CALIBRATION,
        label=CALIBRATION,
        statement=f"A built-in calibration model: a reference line, not ranked ({said.statement})",
    )
