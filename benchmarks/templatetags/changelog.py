"""A release changelog's entries in words ("moved to held out", "time limit 60 s → 120 s"), not stored values."""

from django import template

register = template.Library()

SPLITS = {"public": "public", "held_out": "held out"}
SETTINGS = {
    "protocol": ("prompt protocol", ""),
    "time_limit_seconds": ("time limit", " s"),
    "memory_mb": ("memory limit", " MB"),
    "cpus": ("CPUs", ""),
}

FILE_CHANGES = (("files_changed", "changed"), ("files_added", "added"), ("files_removed", "removed"))
FILES_NAMED = 5  # beyond this many files of one kind, the rest are counted


def _names(paths: list[str]) -> str:
    shown = ", ".join(paths[:FILES_NAMED])
    return shown + (f" and {len(paths) - FILES_NAMED} more" if len(paths) > FILES_NAMED else "")


@register.filter
def change_words(change: dict) -> str:
    """What happened to one paper between two releases."""
    words = []
    if change.get("from_revision") != change.get("to_revision"):
        revision = f"r{change.get('from_revision')} → r{change.get('to_revision')}"
        if not change.get("replaced_by"):  # a replacement by another submission is no revision of the paper
            revision = f"new revision ({revision})"
        files = [f"{verb} {_names(change[key])}" for key, verb in FILE_CHANGES if change.get(key)]
        # Changelogs frozen before files were recorded have no "files_*" keys: the revision alone.
        words.append(f"{revision}: {', '.join(files)}" if files else revision)
    words += [_metadata_words(field) for field in change.get("metadata_changed") or []]
    before, after = change.get("snippets_before"), change.get("snippets_after")
    if before != after:
        words.append(f"{after} snippets instead of {before}")
    if change.get("from_split") and change["from_split"] != change.get("split"):
        words.append(f"moved to {SPLITS.get(change['split'], change['split'])}")
    if not words:
        words.append("snippets retired, restored or edited")
    return "; ".join(words)


def _metadata_words(change: dict) -> str:
    """One papers.yaml field, "papers.yaml venue: DEMO2025 → ICLR2026" (missing or empty reads "none")."""

    def value(v) -> str:
        return "none" if v in (None, "", []) else str(v)

    return f"papers.yaml {change.get('field')}: {value(change.get('from'))} → {value(change.get('to'))}"


@register.filter
def setting_words(change: dict) -> str:
    setting = str(change.get("setting", ""))
    label, unit = SETTINGS.get(setting, (setting.replace("_", " "), ""))

    def value(v) -> str:
        return "this site's default" if v is None else f"{v}{unit}"

    return f"{label}: {value(change.get('from'))} → {value(change.get('to'))}"
