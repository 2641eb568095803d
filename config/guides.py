"""Guides in the site, rendered from the repository's docs/ so the README, the site and the tests share one text."""

from __future__ import annotations

import re
from functools import lru_cache
from xml.etree.ElementTree import Element

import markdown
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor

from common.highlight import CSS_CLASS

# slug -> (file under docs/, title); the navigation and the guides index read this list.
GUIDES = {
    "format": ("FORMAT.md", "The task format"),
    "submitting": ("SUBMITTING.md", "Preparing and submitting a paper"),
    "leaderboard": ("LEADERBOARD.md", "Getting on the leaderboard"),
    "agent-runs": ("AGENT_RUNS.md", "Agent runs"),
    "verdicts": ("VERDICTS.md", "How an answer is judged"),
    "evaluating": ("EVALUATING.md", "Evaluating models"),
    "problem-sets": ("PROBLEM_SETS.md", "Papers, problem sets and releases"),
    "operations": ("OPERATIONS.md", "Deploying and operating"),
    "reference": ("REFERENCE.md", "Reference: commands, settings and REST API"),
    "developing": ("DEVELOPING.md", "Developing the platform"),
    "architecture": ("ARCHITECTURE.md", "Architecture"),
}
# What each guide is for, in a line: the guides index says it to whoever does not know which to read.
PURPOSES = {
    "format": "What a task is: papers.yaml, the snippet markers, the test entry point, how answers are spliced and "
    "judged (for authors and for anyone reading a score).",
    "submitting": "How to prepare a paper and its code, submit it through the site and pass validation (for authors), "
    "and how a maintainer publishes a release.",
    "leaderboard": "How to get a model on the leaderboard: register it, start a run or upload answers, read the "
    "scores (for model developers).",
    "agent-runs": "How an agent run works: the workspace and tools the model gets, its budgets, how its answer is "
    "read and scored, the trajectory's schema (for model developers).",
    "verdicts": "What each verdict (passed, failed, flagged, error) and failure category does to a score, the sealed "
    "replay in plain words, and what to do when a verdict looks wrong (for model developers).",
    "evaluating": "How a run is made and judged: workers, sandboxes, the attack guards, the judging rule by rule, "
    "provenance, the reproducibility record, who sees the held-out split, the human baseline (for maintainers and "
    "operators).",
    "problem-sets": "Reviewing submissions, importing, validating and exporting problem sets, published results, "
    "a release's settings and prompt protocols (for maintainers).",
    "operations": "Running the platform on a server with Docker Compose, adding sandbox worker hosts, health, "
    "faults, logs, backups and upgrades (for operators).",
    "reference": "Every make target and manage.py command, every setting the platform reads and every endpoint of the "
    "REST API (for operators and API users).",
    "developing": "The fast test loop, parallel test workers, lint, CI and the scripts that measure the platform "
    "(for engineers).",
    "architecture": "The apps and packages, what each holds and what may import what, the main flows and where "
    "each rule lives (for engineers).",
}
EXAMPLE_PAPER = "dampnest"  # the demo paper the example archive holds


# A link between the docs as the repository has them ("LEADERBOARD.md#anchor", "./FORMAT.md", "docs/FORMAT.md").
_DOC_LINK = re.compile(r"^(?:\./|docs/)?(?P<file>[A-Za-z0-9_-]+\.md)(?P<anchor>#[^\s]*)?$")


def guide_link(href: str) -> str:
    """Where a link in a guide goes in the site: a link to a doc the site serves becomes its guide page (the anchor
    kept), so the docs link each other as files (read in the repository) and as pages (read here); any other link
    is left as written."""
    match = _DOC_LINK.match(href)
    slug = match and next((s for s, (name, _) in GUIDES.items() if name == match["file"]), None)
    if not match or slug is None:
        return href
    return reverse("guide", args=[slug]) + (match["anchor"] or "")


class _GuideLinks(Treeprocessor):
    def run(self, root: Element) -> None:
        for link in root.iter("a"):
            if href := link.get("href"):
                link.set("href", guide_link(href))


class GuideLinks(Extension):
    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802 (Markdown's own name)
        md.treeprocessors.register(_GuideLinks(md), "guide_links", 1)


@lru_cache(maxsize=len(GUIDES))
def guide_html(filename: str) -> str:
    """The guide as HTML; the file is the repository's own text, so its Markdown is trusted."""
    text = (settings.BASE_DIR / "docs" / filename).read_text(encoding="utf-8")
    return markdown.markdown(
        text,
        extensions=["fenced_code", "tables", "toc", "codehilite", GuideLinks()],
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
