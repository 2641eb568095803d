"""Who may see what: one rule per kind of data, asked by every page, API endpoint, download and run.

Held-out tasks are private: to anyone but maintainers nothing of them leaves the platform but aggregate scores
(per split), so their items, prompts, masked files, task files, answers, outputs and per-item outcomes are
maintainers' only. Everything of the public split is public, answers included: like SWE-bench and LiveCodeBench,
which publish the completions of leaderboard entries, a run's public answers and outcomes are visible to
everyone, so a score can be checked line by line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from django.db.models import QuerySet

from benchmarks.duplicates import Match
from benchmarks.models import BenchmarkVersion, Paper, Snippet, Task, VersionTask
from benchmarks.selectors import TaskTotals, user_is_maintainer, version_snippets, version_tasks

if TYPE_CHECKING:  # a lint dependency (django-stubs), not the platform's
    from django_stubs_ext import WithAnnotations

PUBLIC = VersionTask.Split.PUBLIC
HELD_OUT = VersionTask.Split.HELD_OUT


def user_sees_held_out(*, user) -> bool:
    """Held-out items, files, answers and per-item outcomes: maintainers (and superusers) only."""
    return user_is_maintainer(user=user)


def _split_for(user) -> str | None:
    return None if user_sees_held_out(user=user) else PUBLIC


# Items, prompts and masked files


def items_visible(*, version: BenchmarkVersion, user) -> QuerySet[Snippet]:
    """The version's live items the user may see with their masked file and prompt."""
    return version_snippets(version=version, split=_split_for(user))


def items_public(*, version: BenchmarkVersion) -> QuerySet[Snippet]:
    """What leaves the platform in downloads and what uploads answer: the public split's items."""
    return version_snippets(version=version, split=PUBLIC)


def tasks_public(*, version: BenchmarkVersion) -> QuerySet[Task]:
    """The tasks whose files the problem-set download holds: the public split's."""
    return version_tasks(version=version).filter(memberships__version=version, memberships__split=PUBLIC)


# Task files and paper pages


def tasks_visible(*, version: BenchmarkVersion, user) -> QuerySet[Task]:
    """Tasks whose paper page, snippet tree and files the user may see."""
    tasks = version_tasks(version=version)
    split = _split_for(user)
    return tasks if split is None else tasks.filter(memberships__version=version, memberships__split=split)


def release_totals(*, version: BenchmarkVersion, tasks: Iterable[WithAnnotations[Task, TaskTotals]]) -> dict:
    """A release's papers, snippets and lines of code in all and in its held-out split: numbers, shown to everyone who
    may see the release (as aggregate scores are), never what the held-out tasks hold."""
    every = list(tasks)
    held = set(version.memberships.filter(split=HELD_OUT).values_list("task_id", flat=True))

    def counted(chosen: list[WithAnnotations[Task, TaskTotals]]) -> dict[str, int]:
        return {
            "papers": len(chosen),
            "snippets": sum(t.snippet_count for t in chosen),
            "loc": sum(t.total_loc or 0 for t in chosen),
        }

    return {
        **counted(every),
        "public": counted([t for t in every if t.pk not in held]),
        "held_out": counted([t for t in every if t.pk in held]),
    }


def task_visible(*, version: BenchmarkVersion, task: Task, user) -> bool:
    return tasks_visible(version=version, user=user).filter(pk=task.pk).exists()


# Who wrote a task: the app that takes submissions registers its rule in its `AppConfig.ready()` (benchmarks sits below
# it and imports it not), the way apps register what they add to pages (benchmarks/pages.py).
_TASK_AUTHORS: list[Callable[..., Iterable[int]]] = []


def task_author_register(rule: Callable[..., Iterable[int]]) -> None:
    """Add `rule(user=...)`, the ids of the tasks the signed-in person wrote."""
    if rule not in _TASK_AUTHORS:
        _TASK_AUTHORS.append(rule)


def tasks_written(*, user) -> set[int]:
    """The ids of the tasks the signed-in person wrote (their references are their own code: never withheld from
    them, and so never offered to them as an attempt)."""
    if not user.is_authenticated:
        return set()
    return {pk for rule in _TASK_AUTHORS for pk in rule(user=user)}


def task_sources_visible(*, version: BenchmarkVersion, task: Task, user) -> bool:
    """Whether a paper page shows the task's paper text and annotated code (reference bodies included): a public
    task's to everyone, as its download does; a held-out task's to maintainers only."""
    split = version.memberships.filter(task=task).values_list("split", flat=True).first()
    return split == PUBLIC or (split is not None and user_sees_held_out(user=user))


def papers_visible(*, version: BenchmarkVersion, user) -> QuerySet[Paper]:
    """Papers named one by one (leaderboard columns, per-paper scores); held-out ones fold into their split."""
    return Paper.objects.filter(tasks__in=tasks_visible(version=version, user=user).values("pk")).distinct()


def changelog_visible(*, version: BenchmarkVersion, user) -> dict | None:
    """The release's changelog; for non-maintainers held-out papers are counted, never named, and an accepted
    duplicate's matches name only public papers of published releases (`_changelog_matches`)."""
    changelog = version.changelog
    if not changelog:
        return changelog
    if changelog.get("duplicates"):
        changelog = {**changelog, "duplicates": _changelog_duplicates(changelog["duplicates"], user=user)}
    if user_sees_held_out(user=user):
        return changelog
    changelog = {k: v for k, v in changelog.items() if k != "held_out_once_public"}  # names held-out papers
    current = dict(version.memberships.values_list("task__paper__slug", "split"))
    previous = dict(version.previous.memberships.values_list("task__paper__slug", "split")) if version.previous else {}
    hidden = {slug for slug, split in {**previous, **current}.items() if split == HELD_OUT}
    if not hidden:
        return changelog
    shown = {
        **changelog,
        "added": [slug for slug in changelog.get("added", []) if slug not in hidden],
        "removed": [slug for slug in changelog.get("removed", []) if slug not in hidden],
        "changed": [c for c in changelog.get("changed", []) if c["paper"] not in hidden],
    }
    shown["held_out_changes"] = sum(len(changelog.get(k, [])) - len(shown[k]) for k in ("added", "removed", "changed"))
    return shown


HELD_OUT_MATCH = "a maintainer will look at a possible match"
SUBMISSION_MATCH = "another submission under review"
UNPUBLISHED_MATCH = "a paper that is not public"
_DRAFT_NAMED = re.compile(r"\bdraft ([^,\s]+)")


def _changelog_duplicates(entries: list[dict], *, user) -> list[dict]:
    """The accepted duplicates as `user` may see them: a match's releases named as they are now (a draft since
    published is a release); to non-maintainers a duplicate that is itself held out is left out, and a match with
    a held-out paper is left out (an entry left with none with it: how alike a public paper is to a held-out one
    tells of the held-out one), and a match with a submission or a paper of no published release is described,
    never named."""
    published = set(
        BenchmarkVersion.objects.filter(status=BenchmarkVersion.Status.PUBLISHED).values_list("name", flat=True)
    )

    def now(where: str) -> str:
        return _DRAFT_NAMED.sub(lambda m: f"release {m[1]}" if m[1] in published else m[0], where)

    entries = [{**d, "matches": [{**m, "where": now(m["where"])} for m in d["matches"]]} for d in entries]
    if user_sees_held_out(user=user):
        return entries
    held = set(VersionTask.objects.filter(split=HELD_OUT).values_list("task__paper__slug", flat=True))
    public = (
        set(
            VersionTask.objects.filter(split=PUBLIC, version__status=BenchmarkVersion.Status.PUBLISHED).values_list(
                "task__paper__slug", flat=True
            )
        )
        - held
    )

    def shown(match: dict) -> dict | None:
        if match.get("submission") or match["where"].startswith("submission"):
            return {"vague": SUBMISSION_MATCH}
        if match.get("held_out") or match["paper"] in held:
            return None
        return match if match["paper"] in public else {"vague": UNPUBLISHED_MATCH}

    visible = [{**d, "matches": [m for m in map(shown, d["matches"]) if m]} for d in entries if d["paper"] not in held]
    return [d for d in visible if d["matches"]]


def matches_visible(*, matches: Iterable[Match], user) -> list[Match]:
    """What a submission's matches tell `user`: maintainers see each (which paper, where, how alike); anyone else
    is told of a held-out paper only that a maintainer will look at a possible match, and of another submission
    only that it is one under review (neither which, nor how alike), each once."""
    matches = list(matches)
    if user_sees_held_out(user=user):
        return matches
    shown: list[Match] = []
    for match in matches:
        vague = HELD_OUT_MATCH if match.held_out else SUBMISSION_MATCH if match.submission is not None else ""
        if not vague:
            shown.append(match)
        elif not any(m.vague == vague for m in shown):
            shown.append(replace(match, paper="", title="", where="", what="", vague=vague))
    return shown


# What a run spent (tokens in and out, cost)


def usage_withheld(*, run, user, version_holds_out: bool | None = None) -> bool:
    """Whether `user` sees a run's token and cost totals over its public split only: what a run spent on held-out
    items tells the size of their hidden prompts, so that share is maintainers' only (`user` None: what every
    visitor sees, as the leaderboard shows). A run whose scope has no held-out item (the public split only, or a
    release with none held out) has nothing to withhold. `version_holds_out`: whether the run's release holds
    items out, where the caller knows it already (None: looked up)."""
    if not run.covers_held_out or (user is not None and user_sees_held_out(user=user)):
        return False
    if version_holds_out is None:
        version_holds_out = VersionTask.objects.filter(version_id=run.version_id, split=HELD_OUT).exists()
    return version_holds_out


USAGE_WITHHELD_NOTE = "Held-out usage is withheld: tokens and cost are the public split's."


# A model's endpoint


def endpoint_visible(*, user, owner_id: int | None) -> bool:
    """Whether `user` sees a model's api_base (the endpoint the platform calls for it): its owner and maintainers
    only, since it can be a private address (a lab's own server); a model without an owner is the platform's."""
    return bool(user is not None and user.is_authenticated and (owner_id == user.pk or user_is_maintainer(user=user)))


def held_out_once_public(*, version: BenchmarkVersion) -> list[dict]:
    """The version's held-out papers that were public in an earlier release (published or deprecated): their code
    and prompts are already out, so holding them out hides nothing. Each as {"paper", "public_in"}, the first release
    that made it public; what the curate page and publishing warn a maintainer of."""
    held = set(version.memberships.filter(split=HELD_OUT).values_list("task__paper__slug", flat=True))
    if not held:
        return []
    earlier = (
        VersionTask.objects.filter(
            split=PUBLIC,
            task__paper__slug__in=held,
            version__status__in=[BenchmarkVersion.Status.PUBLISHED, BenchmarkVersion.Status.DEPRECATED],
        )
        .exclude(version=version)
        .order_by("version__published_at")
        .values_list("task__paper__slug", "version__name")
    )
    first: dict[str, str] = {}
    for slug, name in earlier:
        first.setdefault(slug, name)
    return [{"paper": slug, "public_in": name} for slug, name in sorted(first.items())]
