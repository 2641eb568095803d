"""Links that leave the site (e-mails): absolute, built from the site's configured address (SITE_URL)."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse


def site_link(name: str, *args) -> str:
    """The absolute address of the named page, e.g. https://bench.example.org/submissions/12/."""
    return settings.SITE_URL + reverse(name, args=args)
