"""A release's evaluation settings (protocol, limits), set on a draft and pinned when it is published."""

from __future__ import annotations

import math

from django.core.exceptions import ValidationError
from django.db import transaction

from benchmarks.errors import CurationError
from benchmarks.models import (
    BenchmarkVersion,
)
from benchmarks.selectors import (
    protocol_get,
)
from benchmarks.services.curation import draft_require
from benchmarks.services.maintainers import maintainer_require

# A release's evaluation settings: the default prompt protocol and the limits of one test run.
RELEASE_SETTINGS = ("protocol", "time_limit_seconds", "memory_mb", "cpus", "mutation_score_min", "agent_budget_max")


def version_settings(*, version: BenchmarkVersion) -> dict:
    settings = {
        "protocol": version.protocol_id,
        "time_limit_seconds": version.time_limit_seconds,
        "memory_mb": version.memory_mb,
        "cpus": version.cpus,
    }
    if version.agent_budget_max:  # pinned in the manifest once set; a release without keeps its manifest as it was
        settings["agent_budget_max"] = version.agent_budget_max
    return settings


@transaction.atomic
def version_settings_set(*, version: BenchmarkVersion, actor=None, **changes) -> BenchmarkVersion:
    """Change a draft's evaluation settings (None: this site's limit at publish); a release's never change."""
    maintainer_require(actor)
    draft_require(version)
    unknown = set(changes) - set(RELEASE_SETTINGS)
    if unknown:
        raise CurationError(
            f"unknown release setting(s) {', '.join(sorted(unknown))}; known: {', '.join(RELEASE_SETTINGS)}"
        )
    if "protocol" in changes:  # UnknownProtocol lists the known ones
        changes["protocol_id"] = protocol_get(name=changes.pop("protocol")).name
    for field_name, value in changes.items():
        setattr(version, field_name, value)
    try:
        version.full_clean()
    except ValidationError as exc:
        raise CurationError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
    version.save()
    return version


def release_settings_pin(version: BenchmarkVersion) -> None:
    """At publish, a limit left blank takes this site's current setting, so the release records every value."""
    from django.conf import settings

    if version.time_limit_seconds is None:
        version.time_limit_seconds = max(1, math.ceil(settings.SANDBOX_WALL_SECONDS))
    if version.memory_mb is None:
        version.memory_mb = settings.SANDBOX_MEMORY_MB
    if version.cpus is None:
        version.cpus = settings.SANDBOX_CPUS
    if version.mutation_score_min is None:  # what its tasks were validated against, read later as this release's
        version.mutation_score_min = settings.MUTATION_SCORE_MIN
