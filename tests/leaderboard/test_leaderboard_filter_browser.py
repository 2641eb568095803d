"""In Chromium: a filter chosen on the leaderboard (issue 37: Mode = agent) narrows everything drawn from the rows,
not the table alone: the reference lines, the ranking chart's bars and the per-paper breakdown follow it; and the
reference lines follow the paper setting as they follow the mode."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from benchmarks.services.psets import pset_import
from evaluation.models import EvaluationRun
from tests.conftest import DEMO_PSET
from tests.leaderboard.test_leaderboard_browser import calibrate

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_a_filter_narrows_the_reference_lines_charts_and_breakdowns_too(browser_page, live_server, media_root):
    page, base = browser_page, live_server.url
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    for name in ("reference", "placeholder", "strong"):
        calibrate(version, name, passed=name != "placeholder")
    tool = calibrate(version, "tooluser", passed=True)
    EvaluationRun.objects.filter(pk=tool.pk).update(mode="agent")

    page.goto(f"{base}/versions/1.0.0/leaderboard/")
    heat = page.locator("#breakdown table.heatmap tbody tr")
    assert heat.count() == 4
    page.locator("#id_mode").select_option("agent")
    page.wait_for_url("**mode=agent**")
    page.wait_for_function("document.querySelectorAll('#breakdown table.heatmap tbody tr').length === 1")
    assert "Tooluser" in heat.first.inner_text()
    assert page.locator("#leaderboard-table tbody.reference-lines").count() == 0, "single-shot lines are gone"
    bars = json.loads(page.locator("#ranking-data").text_content())
    assert len(bars) == 1 and bars[0]["label"].startswith("Tooluser (")
    page.wait_for_function("document.getElementById('ranking-chart').width > 0")
    assert page.locator("h1").count() == 1, "the results were swapped in place, not a page inside the page"
    links = page.locator("nav.tabs a").evaluate_all("(links) => links.map((a) => a.getAttribute('href'))")
    assert all("mode=agent" in href for href in links), "the breakdown tabs keep the filter"


def test_reference_lines_follow_the_paper_setting(client, media_root):
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    reference = calibrate(version, "reference", passed=True)
    without = calibrate(version, "strong", passed=True)
    EvaluationRun.objects.filter(pk=without.pk).update(with_paper=False)
    url = reverse("leaderboard", args=["1.0.0"])
    assert f'href="/runs/{reference.pk}/"' in client.get(url, {"paper": "with"}).content.decode()
    page = client.get(url, {"paper": "without"}).content.decode()
    assert f'href="/runs/{without.pk}/"' in page
    assert f'href="/runs/{reference.pk}/"' not in page, "a with-paper reference line is no line for without-paper rows"
