"""Prompt protocols added by maintainers."""

from __future__ import annotations

from django.db import transaction

from benchmarks.errors import CurationError
from benchmarks.models import (
    PromptProtocol,
)


@transaction.atomic
def protocol_add(
    *,
    name: str,
    template: str,
    template_without_paper: str = "",
    masking: str = "standard",
    masked_header: bool = True,
    context_join: str = "standard",
) -> PromptProtocol:
    """Add a prompt protocol; an existing one is never changed, since runs and releases name it."""
    if PromptProtocol.objects.filter(name=name).exists():
        raise CurationError(f"a prompt protocol named {name!r} exists already; protocols never change: pick a new name")
    row = PromptProtocol(
        name=name,
        template=template,
        template_without_paper=template_without_paper,
        masking=masking,
        masked_header=masked_header,
        context_join=context_join,
    )
    problems = row.as_protocol().problems()
    if problems:
        raise CurationError(f"prompt protocol {name!r} is not usable: " + "; ".join(problems))
    row.full_clean()
    row.save()
    return row
