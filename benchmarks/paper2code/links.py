"""Links the platform renders as hrefs (a paper's abstract and code, a model's endpoint): absolute http(s) only."""

from __future__ import annotations

from urllib.parse import urlsplit

LINK_SCHEMES = ("http", "https")


def link_problem(value: str) -> str:
    """Why `value` cannot be a link, or "" when it can (a blank value is no link at all)."""
    if not value:
        return ""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError as exc:
        return f"is not a URL ({exc})"
    if parts.scheme.lower() not in LINK_SCHEMES:
        return f"must start with http:// or https:// (not {parts.scheme + ':' if parts.scheme else 'without a scheme'})"
    if not host:
        return "has no host name"
    return ""
