"""One paper once (issue 37): stored packages' fingerprints, the papers of every release (drafts included) a package
matches, and the duplicates a maintainer let in with a reason, which the release's changelog keeps.

The likeness itself, and the rule that calls it a match, is `paper2code/likeness.py`; submissions/duplicates.py
adds the other submissions under review for a submission's check.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from django.db import transaction

from benchmarks.models import BenchmarkVersion, DuplicateAcceptance, PackageFingerprint, Task, TaskPackage, VersionTask
from benchmarks.paper2code import parse
from benchmarks.paper2code.likeness import FINGERPRINT_VERSION, Likeness, fingerprint, likeness, package_fingerprint
from benchmarks.paper2code.pset import PaperPackage
from benchmarks.selectors import blob_read, task_titles_as_released


@dataclass(frozen=True)
class Match:
    """A paper a candidate matches: which (slug and title), where it is (releases, or a submission) and what
    matched, in words."""

    paper: str
    title: str
    where: str
    what: str
    strength: float = 0.0  # for the order only: the most alike first
    held_out: bool = False  # held out in a release: named to maintainers only
    submission: int | None = None  # the submission under review it is, if any: named to maintainers only
    vague: str = ""  # what a viewer who may not know which paper it is is told instead (visibility.matches_visible)

    def as_json(self) -> dict:
        return {
            "paper": self.paper,
            "title": self.title,
            "where": self.where,
            "what": self.what,
            "held_out": self.held_out,
            "submission": self.submission,
        }

    def __str__(self) -> str:
        return self.vague or f'{self.paper} ("{self.title}", {self.where}): {self.what}'


def matches_text(matches: Iterable[Match]) -> str:
    return "; ".join(str(m) for m in matches)


def fingerprint_key(*, files: Mapping[str, str], paper_path: str, annotated_paths: Iterable[str]) -> str:
    """What a fingerprint is stored under: the fingerprint's version and the package content it is made of."""
    content = {"v": FINGERPRINT_VERSION, "files": dict(sorted(files.items())), "paper": paper_path}
    content["annotated"] = sorted(annotated_paths)
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _store(key: str, data: dict) -> dict:
    PackageFingerprint.objects.update_or_create(key=key, defaults={"data": data})
    return data


def package_fingerprint_store(*, package: PaperPackage) -> dict:
    """The fingerprint of a package in memory (an import, a task being stored), made unless stored already."""
    files = {path: hashlib.sha256(data).hexdigest() for path, data in package.files.items()}
    key = fingerprint_key(files=files, paper_path=package.paper_path, annotated_paths=package.annotated_paths)
    stored = PackageFingerprint.objects.filter(key=key).values_list("data", flat=True).first()
    return stored if stored is not None else _store(key, package_fingerprint(package))


def fingerprints_of(holders: Sequence[TaskPackage]) -> list[dict]:
    """The fingerprints of stored packages (tasks, revisions), in order: read where stored, else made once from the
    package's files (a package stored before fingerprints were) and kept."""
    keys = [fingerprint_key(files=h.files, paper_path=h.paper_path, annotated_paths=h.annotated_paths) for h in holders]
    stored = dict(PackageFingerprint.objects.filter(key__in=set(keys)).values_list("key", "data"))
    for holder, key in zip(holders, keys, strict=True):
        if key not in stored:
            stored[key] = _store(key, _holder_fingerprint(holder))
    return [stored[key] for key in keys]


def _holder_fingerprint(holder: TaskPackage) -> dict:
    """A stored package's fingerprint from the files it is made of alone (its paper text and Python files), so a
    package's data files are never read for it."""
    files = {
        path: blob_read(sha256=digest)
        for path, digest in holder.files.items()
        if path == holder.paper_path or path.endswith(".py") or path in holder.annotated_paths
    }
    return fingerprint(
        paper_text=files.get(holder.paper_path, b"").decode("utf-8", "replace"),
        code_files={path: data for path, data in files.items() if path.endswith(".py")},
        snippet_bodies=[
            s.code
            for path in holder.annotated_paths
            if path in files
            for s in parse(files[path].decode("utf-8", "replace"), path).snippets
        ],
    )


def strength(alike: Likeness) -> float:
    share = alike.snippets_same / alike.snippets if alike.snippets else 0.0
    return max(float(alike.title_same), alike.text, alike.code, share)


def release_matches(
    *, fingerprint: dict, title: str, papers_excluded: Iterable[str] = (), tasks_excluded: Iterable[int] = ()
) -> list[Match]:
    """The papers of every release, drafts included, that a package (its fingerprint and title) matches, each once
    (its most alike task), the most alike first. `papers_excluded`: paper ids never compared (the paper itself, when
    the package is a new revision of it); `tasks_excluded`: tasks never compared (the one it became once accepted).
    Each task's title is the one a release froze (`task_titles_as_released`)."""
    placed: dict[int, list[tuple[str, str, str]]] = {}
    for task_id, name, status, split in (
        VersionTask.objects.exclude(task__paper__slug__in=list(papers_excluded))
        .exclude(task_id__in=list(tasks_excluded))
        .order_by("version__created_at", "version__pk")
        .values_list("task_id", "version__name", "version__status", "split")
    ):
        placed.setdefault(task_id, []).append((name, status, split))
    if not placed:
        return []
    tasks = list(
        Task.objects.filter(pk__in=placed).select_related("paper").defer("test_manifest", "recording").order_by("pk")
    )
    best: dict[str, Match] = {}
    titles = task_titles_as_released(tasks=tasks)
    for task, other in zip(tasks, fingerprints_of(tasks), strict=True):
        alike = likeness(candidate=fingerprint, title=title, other=other, other_title=titles[task.pk])
        if not alike.is_match:
            continue
        where = ", ".join(
            f"{'draft' if status == BenchmarkVersion.Status.DRAFT else 'release'} {name}"
            for name, status, _ in placed[task.pk]
        )
        match = Match(
            paper=task.paper.slug,
            title=titles[task.pk],
            where=f"task r{task.revision} in {where}",
            what=alike.words(),
            strength=strength(alike),
            held_out=any(split == VersionTask.Split.HELD_OUT for _, _, split in placed[task.pk]),
        )
        if task.paper.slug not in best or match.strength > best[task.paper.slug].strength:
            best[task.paper.slug] = match
    return sorted(best.values(), key=lambda m: (-m.strength, m.paper))


@transaction.atomic
def duplicate_acceptance_record(
    *, version: BenchmarkVersion, task: Task, matches: Sequence[Match], reason: str, actor, source: str
) -> DuplicateAcceptance:
    """Keep why a maintainer let `task` into `version` although it matches `matches`; its changelog names it."""
    acceptance, _ = DuplicateAcceptance.objects.update_or_create(
        version=version,
        task=task,
        defaults={
            "matches": [m.as_json() for m in matches],
            "reason": reason.strip(),
            "accepted_by": actor,
            "source": source[:100],
        },
    )
    return acceptance


def changelog_duplicates(*, version: BenchmarkVersion) -> list[dict]:
    """The changelog's entries of the papers accepted into `version` although they match another paper, each with
    the reason it was accepted: those still in the version when it is published."""
    kept = set(version.memberships.values_list("task_id", flat=True))
    return [
        {
            "paper": d.task.paper.slug,
            "revision": d.task.revision,
            "matches": d.matches,
            "reason": d.reason,
            "accepted_by": d.accepted_by.username if d.accepted_by else "",
            "source": d.source,
        }
        for d in version.duplicates_accepted.select_related("task__paper", "accepted_by")
        if d.task_id in kept
    ]
