"""A release's manifest (what publishing freezes, hashed) and its changelog against the release before."""

from __future__ import annotations

import json

from django.db.models import Q

from benchmarks.models import (
    BenchmarkVersion,
    Snippet,
    Task,
)
from benchmarks.services.release_settings import version_settings


def version_manifest(*, version: BenchmarkVersion) -> dict:
    """The frozen content of a version: every task (with its split) and live snippet by content hash."""
    memberships = version.memberships.select_related("task__paper").order_by("task__paper__slug")
    retired = set(version.retirements.values_list("snippet_id", flat=True))
    snippets: dict[int, list[Snippet]] = {}
    for snippet in Snippet.objects.filter(task__memberships__version=version).order_by("file_path", "position"):
        if snippet.pk not in retired:
            snippets.setdefault(snippet.task_id, []).append(snippet)
    return {
        "version": version.name,
        "settings": version_settings(version=version),
        "tasks": [
            {
                "paper": m.task.paper.slug,
                "revision": m.task.revision,
                "content_hash": m.task.content_hash,
                "environment_hash": m.task.environment_hash,
                "split": m.split,
                "metadata": _manifest_metadata(m.task),
                "snippets": [
                    {"id": s.pk, "file": s.file_path, "name": s.name, "loc": s.loc, "code_hash": s.code_hash}
                    for s in snippets.get(m.task_id, [])
                ],
            }
            for m in memberships
        ],
        "retired": [
            {"id": r.snippet_id, "name": r.snippet.name, "paper": r.snippet.task.paper.slug, "reason": r.reason}
            for r in version.retirements.select_related("snippet__task__paper").order_by("snippet_id")
        ],
    }


def _manifest_metadata(task: Task) -> dict[str, object]:
    """The task's papers.yaml fields as the release freezes them (dates as ISO text): a paper's row holds only its
    latest values, so a later changelog reads the earlier ones here."""
    entry = {k: v for k, v in {**task.package_entry(), **task.package_extra()}.items() if k != "id"}
    return json.loads(json.dumps(entry, default=str))


def _metadata_changes(old: dict | None, new: dict | None) -> list[dict]:
    """Which papers.yaml fields changed, old -> new (none when a release was frozen before manifests kept them)."""
    if old is None or new is None:
        return []
    return [
        {"field": key, "from": old.get(key), "to": new.get(key)}
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]


def release_changelog(*, previous: dict | None, manifest: dict) -> dict:
    """Papers added, removed and changed (new task content and its papers.yaml fields, or snippets retired or
    restored) since `previous`."""
    before = {t["paper"]: t for t in (previous or {}).get("tasks", [])}
    after = {t["paper"]: t for t in manifest["tasks"]}
    changed = []
    for paper in sorted(set(before) & set(after)):
        old, new = before[paper], after[paper]
        metadata = _metadata_changes(old.get("metadata"), new.get("metadata"))
        if metadata or (old["content_hash"], old["split"], [s["code_hash"] for s in old["snippets"]]) != (
            new["content_hash"],
            new["split"],
            [s["code_hash"] for s in new["snippets"]],
        ):
            changed.append(
                {
                    "paper": paper,
                    "from_revision": old["revision"],
                    "to_revision": new["revision"],
                    "snippets_before": len(old["snippets"]),
                    "snippets_after": len(new["snippets"]),
                    "from_split": old["split"],
                    "split": new["split"],
                    "metadata_changed": metadata,
                }
            )
    _changelog_files(changed)
    # Releases frozen before settings were in the manifest have none to compare with.
    old_settings = (previous or {}).get("settings")
    settings_changed = [
        {"setting": key, "from": old_settings.get(key), "to": value}
        for key, value in manifest.get("settings", {}).items()
        if old_settings is not None and old_settings.get(key) != value
    ]
    return {
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
        "changed": changed,
        "settings": settings_changed,
    }


def _changelog_files(changed: list[dict]) -> None:
    """Name the files a new revision changed, added and removed (a task's revisions are immutable, so their file
    maps are read once, when the changelog is frozen)."""
    revised = [c for c in changed if c["from_revision"] != c["to_revision"]]
    if not revised:
        return
    wanted = Q()
    for change in revised:
        wanted |= Q(paper__slug=change["paper"], revision__in=(change["from_revision"], change["to_revision"]))
    files = {
        (slug, revision): mapping
        for slug, revision, mapping in Task.objects.filter(wanted).values_list("paper__slug", "revision", "files")
    }
    for change in revised:
        old = files.get((change["paper"], change["from_revision"]), {})
        new = files.get((change["paper"], change["to_revision"]), {})
        change["files_changed"] = sorted(p for p in old.keys() & new.keys() if old[p] != new[p])
        change["files_added"] = sorted(new.keys() - old.keys())
        change["files_removed"] = sorted(old.keys() - new.keys())
