"""A published release's page as a reader meets it (issue 35's walk): its minimum mutation score is the warning
threshold it had when published, not today's site setting, and a download's size shows on its link before it starts."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse

from benchmarks.models import BenchmarkVersion

pytestmark = pytest.mark.django_db


THRESHOLD = "a warning threshold: validation warns below it, never fails a submission for it"


def test_a_draft_release_says_the_mutation_score_in_the_same_words(client, maintainer):
    from benchmarks.services.curation import version_draft_create

    draft = version_draft_create(name="9.9.0")
    BenchmarkVersion.objects.filter(pk=draft.pk).update(mutation_score_min=0.6)
    client.force_login(maintainer)
    [said] = _said(client.get(reverse("version-detail", args=[draft.name])).content.decode(), "mutation-score-min")
    assert said == "60%: " + THRESHOLD


def _said(html: str, testid: str) -> list[str]:
    return [
        " ".join(unescape(re.sub(r"<[^>]+>", " ", part.split(">", 1)[1].split("</", 1)[0])).split())
        for part in html.split(f'data-testid="{testid}"')[1:]
    ]


def test_a_published_release_says_its_mutation_score_threshold_and_the_size_of_each_download(client, release, settings):
    settings.MUTATION_SCORE_MIN = 0.9  # the site's setting changed after publish: the release keeps its own
    page = client.get(reverse("version-detail", args=[release.name])).content.decode()
    [said] = _said(page, "mutation-score-min")
    # A warning threshold, never a requirement (walk 38: "required" here, "warns below it" on the draft's page).
    assert said == "60%, kept since publish: " + THRESHOLD
    assert "required" not in said
    BenchmarkVersion.objects.filter(pk=release.pk).update(
        downloads={
            **release.downloads,
            "harbor": {"filename": "harbor-1.0.0.tar.gz", "sha256": "0" * 64, "size": 215_000_000},
        }
    )
    page = client.get(reverse("version-detail", args=[release.name])).content.decode()
    sizes = _said(page, "download-size")
    # Decimal units, as labelled (walk 38: 16,926,308 bytes read "16.1 MB", binary units under decimal names).
    assert len(sizes) == 3 and "(215 MB)" in sizes and all(re.fullmatch(r"\(\d.* (kB|MB|bytes)\)", s) for s in sizes)
    assert _said(page, "download-large") == ["a large download: allow time and disk space"]


def test_one_helper_says_every_size_in_decimal_units():
    from common.intake import UploadLimits
    from common.sizes import size_text

    assert size_text(16_926_308) == "16.9 MB"  # was "16.1 MB" on the release page
    assert [size_text(n) for n in (999, 1_000, 1_500, 2_000_000_000)] == ["999 bytes", "1 kB", "1.5 kB", "2 GB"]
    assert size_text(UploadLimits().max_archive_bytes) == "50 MB"  # a limit said as it is
