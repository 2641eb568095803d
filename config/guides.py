"""Guides in the site, rendered from the repository's docs/ so the README, the site and the tests share one text."""

from __future__ import annotations

from functools import lru_cache

import markdown
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe

from common.highlight import CSS_CLASS

# slug -> (file under docs/, title); the navigation and the guides index read this list.
GUIDES = {
    "format": ("FORMAT.md", "The task format"),
    "submitting": ("SUBMITTING.md", "Preparing and submitting a paper"),
    "leaderboard": ("LEADERBOARD.md", "Getting on the leaderboard"),
    "agent-runs": ("AGENT_RUNS.md", "Agent runs"),
}
# What each guide is for, in a line: the guides index says it to whoever does not know which to read.
PURPOSES = {
    "format": "What a task is: papers.yaml, the snippet markers, the test entry point, how answers are spliced and "
    "judged (for authors and for anyone reading a score).",
    "submitting": "How to prepare a paper and its code, submit it through the site and pass validation (for authors).",
    "leaderboard": "How to get a model on the leaderboard: register it, start a run or upload answers, read the "
    "scores (for model developers).",
    "agent-runs": "How an agent run works: the workspace and tools the model gets, its budgets, how its answer is "
    "read and scored, the trajectory's schema (for model developers).",
}
EXAMPLE_PAPER = "dampnest"  # the demo paper the example archive holds


@lru_cache(maxsize=len(GUIDES))
def guide_html(filename: str) -> str:
    """The guide as HTML; the file is the repository's own text, so its Markdown is trusted."""
    text = (settings.BASE_DIR / "docs" / filename).read_text(encoding="utf-8")
    return markdown.markdown(
        text,
        extensions=["fenced_code", "tables", "toc", "codehilite"],
        output_format="html",
        extension_configs={"codehilite": {"css_class": CSS_CLASS, "guess_lang": False}},
    )


def guide_index(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "guide.html",
        {
            "title": "Guides",
            "guides": GUIDES.items(),
            "slug": "",
            "index": [(slug, title, PURPOSES[slug]) for slug, (_, title) in GUIDES.items()],
        },
    )


def guide(request: HttpRequest, slug: str) -> HttpResponse:
    if slug not in GUIDES:
        raise Http404(f"no guide {slug!r}")
    filename, title = GUIDES[slug]
    return render(
        request,
        "guide.html",
        {"title": title, "body": mark_safe(guide_html(filename)), "guides": GUIDES.items(), "slug": slug},
    )


@lru_cache(maxsize=1)
def example_archive() -> bytes:
    """A one-paper problem set from the demo set (its papers.yaml entry and folder) as a zip, the same bytes every
    time: what step 3 of the submission form takes whole."""
    import io
    import zipfile

    import yaml

    demo = settings.BASE_DIR / "benchmarks" / "demo"
    entry = next(
        e for e in yaml.safe_load((demo / "papers.yaml").read_text(encoding="utf-8")) if e["id"] == EXAMPLE_PAPER
    )
    members = {"papers.yaml": yaml.safe_dump([entry], sort_keys=False, allow_unicode=True).encode("utf-8")}
    folder = demo / EXAMPLE_PAPER
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            members[f"{EXAMPLE_PAPER}/{path.relative_to(folder).as_posix()}"] = path.read_bytes()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(f"example-{EXAMPLE_PAPER}/{name}", date_time=(2025, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return buffer.getvalue()


def guide_example(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(example_archive(), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="example-{EXAMPLE_PAPER}.zip"'
    return response
