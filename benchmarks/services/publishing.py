"""Publishing a release (checked, pinned, its manifest and changelog written) and deprecating one; the signals
other apps hear."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from benchmarks.duplicates import (
    changelog_duplicates,
)
from benchmarks.errors import CurationError
from benchmarks.models import (
    BenchmarkVersion,
)
from benchmarks.services.blobs import sha256_hex
from benchmarks.services.curation import SEMVER_RE
from benchmarks.services.downloads import release_downloads_build, release_downloads_queue
from benchmarks.services.maintainers import maintainer_require
from benchmarks.services.manifests import release_changelog, version_manifest
from benchmarks.services.release_settings import release_settings_pin
from benchmarks.visibility import held_out_once_public

# Sent after a version is published; evaluation queues the continuously evaluated models on it.
version_published = Signal()


# Sent when a version's tasks are imported or published: evaluation has the workers make their test manifests and
# recordings once the transaction commits (evaluation/preparation.py).
release_prepare_wanted = Signal()


# What publishing freezes, as the publish form, its confirmation and the guide say it.
PUBLISH_FREEZES = (
    "Publishing cannot be undone. It freezes the release: its papers and their splits (public or held out), its "
    "snippets and retirements, its evaluation settings (prompt protocol, time limit, memory, CPUs, mutation score "
    "minimum, agent budget), its manifest and hash, and its changelog. A worker then builds its downloads, which "
    "never change either, and the calibration runs that draw its reference lines start by themselves."
)


def release_previous(*, version: BenchmarkVersion) -> BenchmarkVersion | None:
    """The release a draft's changelog is computed against: the latest published or deprecated one."""
    return (
        BenchmarkVersion.objects.filter(
            status__in=[BenchmarkVersion.Status.PUBLISHED, BenchmarkVersion.Status.DEPRECATED]
        )
        .exclude(pk=version.pk)
        .order_by("-published_at")
        .first()
    )


CHANGELOG_ENTRIES = ("added", "removed", "changed", "settings")


@dataclass(frozen=True)
class PublishPreview:
    """What publishing a draft now would freeze as its changelog, against the release it would be compared with."""

    version: BenchmarkVersion
    previous: BenchmarkVersion | None
    changelog: dict

    @property
    def unchanged(self) -> bool:
        """Nothing differs from the previous release: publishing would freeze a copy of it under a new name."""
        return self.previous is not None and not any(self.changelog.get(key) for key in CHANGELOG_ENTRIES)

    @property
    def warning(self) -> str:
        """What the publish form and its confirmation say when nothing changed; "" otherwise."""
        if not self.unchanged or self.previous is None:
            return ""
        return (
            f"No changes since {self.previous.name}: publishing {self.version.name} freezes the same papers, splits, "
            f"snippets and settings as {self.previous.name} under a new name."
        )


def _changelog_notes(*, version: BenchmarkVersion, changelog: dict) -> None:
    """What a draft's changelog says besides its manifests' differences, in its preview and when published: tasks
    that replaced their paper id's task (not as its revision), papers accepted although they match another paper
    and why, held-out papers once public."""
    replaced = dict(version.memberships.exclude(replaced_by="").values_list("task__paper__slug", "replaced_by"))
    for change in changelog["changed"]:
        if change["paper"] in replaced and change["from_revision"] != change["to_revision"]:
            change["replaced_by"] = replaced[change["paper"]]
    if duplicates := changelog_duplicates(version=version):
        changelog["duplicates"] = duplicates  # accepted although each matches another paper: why
    if once_public := held_out_once_public(version=version):
        changelog["held_out_once_public"] = once_public  # publishing is allowed; the warning is kept


def release_publish_preview(*, version: BenchmarkVersion) -> PublishPreview:
    """A draft's changelog as `version_publish` would compute it now (its blank limits taking this site's settings,
    as publishing pins them); publishing computes it again from the draft as it is then."""
    previous = release_previous(version=version)
    pinned = BenchmarkVersion.objects.get(pk=version.pk)  # a copy: pinning is publish's, not the draft's
    release_settings_pin(pinned)
    changelog = release_changelog(
        previous=previous.manifest if previous else None, manifest=version_manifest(version=pinned)
    )
    _changelog_notes(version=version, changelog=changelog)  # the preview is what publishing will freeze
    return PublishPreview(version=version, previous=previous, changelog=changelog)


@transaction.atomic
def version_publish(
    *,
    version: BenchmarkVersion,
    actor=None,
    notes: str | None = None,
    downloads_inline: bool = False,
    prepare: bool = True,
) -> BenchmarkVersion:
    """Freeze a draft: manifest and its hash, changelog against the latest release; then announce it. Its downloads
    are built by a worker once this commits (a large release takes minutes, too long for a request), or here with
    `downloads_inline` (the import command, which has no request to answer). With `prepare`, the workers make the
    test manifests and recordings its tasks still lack (`release_prepare_wanted`)."""
    maintainer_require(actor)
    version = BenchmarkVersion.objects.select_for_update().get(pk=version.pk)
    if version.status != BenchmarkVersion.Status.DRAFT:
        raise CurationError(f"release {version.name} is already {version.status}")
    if not SEMVER_RE.match(version.name):
        raise CurationError(f"{version.name!r} is not a semantic version name (like 1.2.0 or demo-1.2.0)")
    if not version.memberships.exists():
        raise CurationError(f"release {version.name} has no tasks to publish")
    previous = release_previous(version=version)
    release_settings_pin(version)
    version.manifest = version_manifest(version=version)
    version.manifest_hash = sha256_hex(json.dumps(version.manifest, sort_keys=True, separators=(",", ":")))
    version.previous = previous
    version.changelog = release_changelog(previous=previous.manifest if previous else None, manifest=version.manifest)
    _changelog_notes(version=version, changelog=version.changelog)
    if notes is not None:
        version.notes = notes
    version.status = BenchmarkVersion.Status.PUBLISHED
    version.published_at = timezone.now()
    version.downloads = release_downloads_build(version=version) if downloads_inline else {}
    version.downloads_failed = ""
    version.full_clean()
    version.save()
    if not downloads_inline:
        transaction.on_commit(lambda: release_downloads_queue(version=version))
    if prepare:
        release_prepare_wanted.send(sender=BenchmarkVersion, version=version)
    transaction.on_commit(lambda: version_published.send(sender=BenchmarkVersion, version=version))  # the last word
    return version


@transaction.atomic
def version_deprecate(*, version: BenchmarkVersion, actor=None, note: str) -> BenchmarkVersion:
    maintainer_require(actor)
    if version.status != BenchmarkVersion.Status.PUBLISHED:
        raise CurationError(f"only published releases can be deprecated; {version.name} is {version.status}")
    version.status = BenchmarkVersion.Status.DEPRECATED
    version.deprecated_at = timezone.now()
    version.deprecation_note = note
    version.save(update_fields=["status", "deprecated_at", "deprecation_note"])
    return version
