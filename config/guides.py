"""Guides in the site, rendered from the repository's docs/ so the README, the site and the tests share one text."""

from __future__ import annotations

from functools import lru_cache

import markdown
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe

from config.highlight import CSS_CLASS

# slug -> (file under docs/, title); the navigation and the guides index read this list.
GUIDES = {
    "format": ("FORMAT.md", "The task format"),
    "leaderboard": ("LEADERBOARD.md", "Getting on the leaderboard"),
}


@lru_cache(maxsize=len(GUIDES))
def guide_html(filename: str) -> str:
    """The guide as HTML; the file is the repository's own text, so its Markdown is trusted."""
    text = (settings.BASE_DIR / "docs" / filename).read_text(encoding="utf-8")
    return markdown.markdown(text, extensions=["fenced_code", "tables", "toc", "codehilite"], output_format="html",
                             extension_configs={"codehilite": {"css_class": CSS_CLASS, "guess_lang": False}})


def guide(request: HttpRequest, slug: str) -> HttpResponse:
    if slug not in GUIDES:
        raise Http404(f"no guide {slug!r}")
    filename, title = GUIDES[slug]
    return render(request, "guide.html", {"title": title, "body": mark_safe(guide_html(filename)),
                                          "guides": GUIDES.items(), "slug": slug})
