"""Verification: a maintainer vouches for a self-reported upload."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from benchmarks.selectors import user_is_maintainer
from evaluation.models import EvaluationRun, ProvenanceChange
from evaluation.services.models import EvaluationError

MAX_REASON_CHARS = 2000


def run_verify(*, run: EvaluationRun, actor, reason: str) -> EvaluationRun:
    """A maintainer vouches for a self-reported upload (e.g. reproduced its answers): it becomes a verified upload,
    recorded with who checked it and why."""
    if not user_is_maintainer(user=actor):
        raise PermissionDenied("only maintainers may verify a run")
    reason = reason.strip()
    if not reason:
        raise EvaluationError("say why the run is verified (e.g. how its answers were checked)")
    if len(reason) > MAX_REASON_CHARS:
        raise EvaluationError(f"the reason is {len(reason)} characters; at most {MAX_REASON_CHARS}")
    run = EvaluationRun.objects.select_for_update().get(pk=run.pk)
    if run.provenance != EvaluationRun.Provenance.SELF_REPORTED:
        raise EvaluationError(
            f"run {run.pk} is {run.get_provenance_display()}; only self-reported runs can be verified"
        )
    if run.api_base:
        raise EvaluationError(
            f"run {run.pk} was generated at its owner's own endpoint, not uploaded: only uploads "
            "are verified (a run at the provider's own address is verified by itself)"
        )
    if run.status != EvaluationRun.Status.COMPLETED:
        raise EvaluationError(f"run {run.pk} is {run.status}; verify it once it has completed")
    ProvenanceChange.objects.create(
        run=run,
        from_provenance=run.provenance,
        to_provenance=EvaluationRun.Provenance.VERIFIED_UPLOAD,
        actor=actor,
        reason=reason,
    )
    run.provenance = EvaluationRun.Provenance.VERIFIED_UPLOAD
    run.save(update_fields=["provenance"])
    return run
