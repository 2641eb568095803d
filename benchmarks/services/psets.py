"""A problem set imported into a draft release (and published, if asked), and a release exported as one."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from benchmarks.duplicates import (
    Match,
    duplicate_acceptance_record,
    matches_text,
    package_fingerprint_store,
    release_matches,
)
from benchmarks.models import (
    BenchmarkVersion,
    Task,
)
from benchmarks.paper2code import PackageError, Problem
from benchmarks.paper2code.pset import PAPERS_YAML, PaperPackage, read_pset_with_warnings, write_pset
from benchmarks.paper2code.requirements import requirements_problems
from benchmarks.selectors import (
    package_load,
    version_tasks,
)
from benchmarks.services.curation import version_task_set
from benchmarks.services.publishing import release_prepare_wanted, version_publish
from benchmarks.services.release_settings import version_settings, version_settings_set
from benchmarks.services.task_storage import task_store


@dataclass
class ImportResult:
    version: BenchmarkVersion
    tasks_created: list[Task] = field(default_factory=list)
    tasks_unchanged: list[Task] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


@transaction.atomic
def pset_import(
    *,
    root: Path,
    version_name: str,
    shared_requirements: str = "",
    publish: bool = False,
    release_settings: dict | None = None,
    environment: str | None = None,
    environment_file: str = "",
    prepare: bool = True,
    duplicate_reason: str = "",
    actor=None,
) -> ImportResult:
    """Import a problem set into a version: all or nothing; the same content twice changes nothing.

    A paper that matches another paper of a release (benchmarks/duplicates.py: another paper id, drafts included) is
    refused, every match named, unless `duplicate_reason` says why it is imported anyway: the changelog keeps it.

    `prepare`: once committed, the workers make its tasks' test manifests and recordings (`release_prepare_wanted`),
    so its first run does not.

    `environment` (the text of `environment_file`): every task runs in this one shared environment, and the papers'
    own requirements files are files, never read as requirements (a legacy set: FORMAT.md's import of the original).

    `release_settings` (keys of RELEASE_SETTINGS) are set on the draft; a published version must already have them.
    """
    problems = [
        *requirements_problems(shared_requirements, file="shared requirements"),
        *requirements_problems(environment or "", file="shared environment"),
    ]
    try:
        packages, warnings = read_pset_with_warnings(root, shared_environment=environment is not None)
    except PackageError as exc:
        raise PackageError([*problems, *exc.problems]) from exc
    if problems:
        raise PackageError(problems)
    version, _ = BenchmarkVersion.objects.get_or_create(name=version_name)
    changed = {k: v for k, v in (release_settings or {}).items() if version_settings(version=version).get(k) != v}
    if changed and version.is_frozen:
        raise PackageError(
            [
                Problem(
                    file=str(root),
                    line=0,
                    message=(
                        f"release {version.name} is {version.status} with "
                        f"{', '.join(f'{k} {version_settings(version=version).get(k)}' for k in changed)}; "
                        "its settings are frozen: "
                        "import into a new version name instead"
                    ),
                )
            ]
        )
    if changed:
        try:
            version = version_settings_set(version=version, **changed)
        except ValueError as exc:
            raise PackageError([Problem(file=str(root), line=0, message=str(exc))]) from exc
    result = ImportResult(version=version, warnings=warnings)
    duplicates: dict[Task, list[Match]] = {}
    for package in packages:
        task, created = task_store(
            package=package,
            shared_requirements=shared_requirements,
            environment=environment,
            environment_file=environment_file,
        )
        (result.tasks_created if created else result.tasks_unchanged).append(task)
        if matches := _import_matches(package=package, task=task, created=created):
            duplicates[task] = matches
    if duplicates and not duplicate_reason.strip():
        raise PackageError(
            [
                Problem(
                    PAPERS_YAML,
                    0,
                    f"paper {task.paper.slug} matches {matches_text(matches)}; import it anyway only with "
                    "--duplicate-reason saying why (the release's changelog keeps it)",
                )
                for task, matches in duplicates.items()
            ]
        )
    new_tasks = result.tasks_created + result.tasks_unchanged
    current = set(version.tasks.values_list("pk", flat=True))
    replaced = set(version.tasks.filter(paper__in=[t.paper for t in new_tasks]).values_list("pk", flat=True))
    wanted = (current - replaced) | {t.pk for t in new_tasks}
    if wanted != current:
        if version.is_frozen:
            raise PackageError(
                [
                    Problem(
                        file=str(root),
                        line=0,
                        message=f"release {version.name} is {version.status} and frozen; "
                        "import into a new version name instead",
                    )
                ]
            )
        for task in new_tasks:
            version_task_set(version=version, task=task)
    for task, matches in duplicates.items():  # each new to every release: the version is a draft, or refused above
        duplicate_acceptance_record(
            version=version, task=task, matches=matches, reason=duplicate_reason, actor=actor, source="import_pset"
        )
    if publish and not version.is_frozen:
        result.version = version_publish(version=version, downloads_inline=True, prepare=prepare)
    elif prepare:
        release_prepare_wanted.send(sender=BenchmarkVersion, version=version)
    return result


def _import_matches(*, package: PaperPackage, task: Task, created: bool) -> list[Match]:
    """The release papers of other ids an imported package matches; none for a task some release holds already (it
    was checked when it came in: the set imported again)."""
    if not created and task.memberships.exists():
        return []
    return release_matches(
        fingerprint=package_fingerprint_store(package=package), title=package.title, papers_excluded=[package.id]
    )


def version_export(*, version: BenchmarkVersion, root: Path) -> list[PaperPackage]:
    """Write a version's tasks as a problem set in the FORMAT.md layout."""
    packages = [package_load(task) for task in version_tasks(version=version)]
    write_pset(root, packages)
    return packages
