"""A phone (390 px, Chromium) shows what matters without a sideways swipe (issue 37, item 7): every table with a
score shows it beside the model or run it scores (the other columns behind the table's column toggle), the charts'
labels stay inside the chart, and the signed-in navigation is one line that opens as a menu, with or without
JavaScript. Screenshots go to test-artifacts/phone/."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.conf import settings as django_settings
from django.test import Client
from playwright.sync_api import expect

from benchmarks.services.psets import pset_import
from evaluation.models import EvaluationRun, Generation, ModelEntry
from tests.conftest import DEMO_PSET, REPO
from tests.leaderboard.test_leaderboard_browser import calibrate

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ARTIFACTS = REPO / "test-artifacts" / "phone"
PHONE = {"width": 390, "height": 844}
LONG_NAME = "Claude 3.5 Sonnet (October 2024) with extended thinking"
# Each table with a score, by page (its score column is the one headed "Scaled pass@1").
SCORE_TABLES = {
    "/": "#home-leaderboard",
    "/versions/1.0.0/leaderboard/": "#leaderboard-table table",
    "/models/strong/": "#model-runs",
    "/runs/": "main table",
}


def sign_in(page, base: str, user) -> None:
    client = Client()
    client.force_login(user)
    name = django_settings.SESSION_COOKIE_NAME
    page.context.add_cookies([{"name": name, "url": base, "value": client.cookies[name].value}])


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def broken_inside(page, table: str) -> list[str]:
    """The words of `table`'s headers and the numbers of its numeric cells that a line break cuts in two (issue 37:
    "Relea|se", "100.0|0" at 390 px): each as a range of its text, which a cut spreads over two boxes."""
    return page.evaluate(
        r"""(table) => {
            const broken = [];
            const t = document.querySelector(table);
            const check = (cell, pattern) => {
                const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
                for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                    for (const m of node.textContent.matchAll(pattern)) {
                        const range = document.createRange();
                        range.setStart(node, m.index);
                        range.setEnd(node, m.index + m[0].length);
                        const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
                        if (lines.size > 1) broken.push(m[0]);
                    }
                }
            };
            t.querySelectorAll('th').forEach(th => check(th, /[^\s]+/g));
            t.querySelectorAll('td.num').forEach(td => check(td, /[-−+]?\d[\d.,]*\d|\d/g));
            return broken;
        }""",
        table,
    )


def scores_off_screen(page, table: str, heading: str = "Scaled pass@1") -> list[str]:
    """The score cells (the column headed "Scaled pass@1", or `heading`) that need a sideways swipe: those hidden, or
    whose right edge is past the screen or past their scrolling box's visible part (the box is at its start, as a
    page opens)."""
    return page.evaluate(
        """([table, heading]) => {
            const t = document.querySelector(table);
            const box = t.closest('.table-wrap') || t;
            const edge = Math.min(window.innerWidth, box.getBoundingClientRect().right);
            const headers = [...t.querySelectorAll('thead th')];
            const column = headers.findIndex(h => h.textContent.trim().startsWith(heading)) + 1;
            if (column === 0) return ['no column headed ' + heading];
            const over = headers[column - 1].getBoundingClientRect().right - edge;
            const widths = headers.map(h => Math.round(h.getBoundingClientRect().width)).join(',');
            if (over > 1) return [`its heading: ${heading} by ${Math.round(over)} px; widths ${widths}`];
            const cells = t.querySelectorAll(`tbody tr:not(:has(> [colspan])) > :nth-child(${column})`);
            if (cells.length === 0) return ['no score cell'];
            return [...cells].filter(c => {
                const r = c.getBoundingClientRect();
                return r.width === 0 || r.right > edge + 1;
            }).map(c => c.textContent.trim().slice(0, 30));
        }""",
        [table, heading],
    )


def chart_labels_cut(page) -> list[str]:
    """The bar charts' row labels drawn short of their row's whole name (an ellipsis, a word lost): a phone cut
    "Reference (calibration) (reference line)" to "Reference (calibration)…", losing what told the rows apart."""
    return page.evaluate("""() => {
        const cut = [];
        for (const canvas of document.querySelectorAll('figure.chart canvas')) {
            const chart = window.Chart && window.Chart.getChart(canvas);
            if (!chart || !chart.options.indexAxis || chart.options.indexAxis !== 'y') continue;
            const names = chart.data.labels.map(String);
            chart.scales.y.getLabelItems().forEach((item, i) => {
                const drawn = [].concat(item.label).join(' ');
                if (drawn.replace(/\\s+/g, '') !== names[i].replace(/\\s+/g, '')) cut.push(canvas.id + ': ' + drawn);
            });
        }
        return cut;
    }""")


def chart_labels_outside(page) -> list[str]:
    """The labels drawn outside their chart: a canvas chart's axis labels past the canvas's left or right edge
    (Chart.js draws a label too wide for its axis off the canvas), an SVG chart's texts past its viewBox."""
    return page.evaluate("""() => {
        const outside = [];
        for (const canvas of document.querySelectorAll('figure.chart canvas')) {
            const chart = window.Chart && window.Chart.getChart(canvas);
            if (!chart) { outside.push(canvas.id + ': not drawn'); continue; }
            const ctx = canvas.getContext('2d');
            for (const scale of Object.values(chart.scales)) {
                ctx.font = window.Chart.helpers.toFont(scale.options.ticks.font).string;
                for (const item of scale.getLabelItems()) {
                    const lines = [].concat(item.label);
                    const width = Math.max(...lines.map(l => ctx.measureText(String(l)).width));
                    const x = item.options.translation[0];
                    const align = item.options.textAlign;
                    const left = align === 'right' ? x - width : align === 'center' ? x - width / 2 : x;
                    if (left < -1 || left + width > chart.width + 1) outside.push(canvas.id + ': ' + lines.join(' '));
                }
            }
        }
        for (const svg of document.querySelectorAll('figure.chart svg')) {
            const view = svg.viewBox.baseVal;
            for (const text of svg.querySelectorAll('text')) {
                const b = text.getBBox();
                const cut = b.x < view.x - 1 || b.x + b.width > view.x + view.width + 1;
                if (cut) outside.push('svg: ' + text.textContent);
            }
        }
        return outside;
    }""")


def test_a_phone_shows_each_score_beside_its_model_and_keeps_the_charts_labels(
    browser_page, live_server, media_root, author, maintainer
):
    page, base = browser_page, live_server.url
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    for name, passed in (("reference", True), ("placeholder", False), ("strong", True), ("weak", False)):
        calibrate(version, name, passed=passed)
    ModelEntry.objects.filter(name="strong").update(display_name=LONG_NAME, knowledge_cutoff=date(2025, 3, 1))
    ModelEntry.objects.filter(name="weak").update(display_name="Weak", knowledge_cutoff=date(2024, 6, 1))
    EvaluationRun.objects.filter(model__name__in=("strong", "weak")).update(created_by=author)
    # The long name's point mid-way along the cost axis: its label ran past the drawing's right edge.
    Generation.objects.filter(run__model__name="strong").update(cost=Decimal("0.002"))
    Generation.objects.filter(run__model__name="weak").update(cost=Decimal("0.004"))
    page.set_viewport_size(PHONE)
    sign_in(page, base, author)

    page.goto(f"{base}/versions/1.0.0/leaderboard/")
    expect(page.locator("#cost-scatter svg")).to_be_visible()
    page.wait_for_function("['ranking-chart', 'over-time-chart'].every(id => window.Chart.getChart(id))")
    shot(page, "charts-leaderboard")
    outside = chart_labels_outside(page)
    cut = chart_labels_cut(page)
    page.goto(f"{base}/versions/1.0.0/leaderboard/?view=failures")
    page.wait_for_function("window.Chart.getChart('failure-chart')")
    cut += chart_labels_cut(page)
    outside += chart_labels_outside(page)

    swipes = {}
    for path, table in SCORE_TABLES.items():
        assert page.goto(f"{base}{path}").status == 200, path
        shot(page, "score-" + (path.strip("/").replace("/", "-") or "home"))
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, f"{path} overflows"
        swipes[path] = scores_off_screen(page, table)
    runs = dict(EvaluationRun.objects.filter(model__name__in=("strong", "weak")).values_list("model__name", "pk"))
    compare = f"/versions/1.0.0/compare/?a={runs['strong']}&b={runs['weak']}"
    assert page.goto(f"{base}{compare}").status == 200
    shot(page, "compare")
    for table, heading in (
        ("#compare-summary", "A − B"),
        ("#compare-summary", "Only A passes"),
        ("#compare-summary", "Only B passes"),
        ("#compare-summary", "McNemar p"),
        ("#compare-items", "Snippet"),
        ("#compare-items", "A (run"),
        ("#compare-items", "B (run"),
    ):
        swipes[f"{compare} {heading}"] = scores_off_screen(page, table, heading)
    broken = broken_inside(page, "#compare-summary")
    assert not broken, f"at 390 px these words or numbers of the compare table break across lines: {broken}"
    assert not outside and not cut and not any(swipes.values()), (
        f"at 390 px these chart labels are outside their chart: {outside}, cut short: {cut}; these need a sideways "
        f"swipe: {swipes}"
    )

    page.goto(f"{base}/versions/1.0.0/leaderboard/")

    # The other columns are behind the column toggle: opened, the leaderboard shows its Mode and Provenance.
    mode_header = page.locator("#leaderboard-table thead th[data-column=mode]")
    expect(mode_header).to_be_hidden()
    page.locator("#column-toggle summary").click()
    expect(mode_header).to_be_visible()
    expect(page.locator("#leaderboard-table thead th[data-column=provenance]")).to_be_visible()

    # A model's runs show which run is its leaderboard row, and the pin action, without "All columns".
    sign_in(page, base, maintainer)
    page.goto(f"{base}/models/strong/")
    shot(page, "model-runs-pin")
    row = page.locator("#model-runs tbody tr.on-leaderboard")
    expect(row.get_by_text("on the leaderboard")).to_be_visible()
    expect(row.get_by_role("button", name="Pin to the leaderboard")).to_be_visible()
    assert scores_off_screen(page, "#model-runs", "Leaderboard") == []
    row.get_by_role("button", name="Pin to the leaderboard").click()
    expect(page.locator("#model-runs tbody tr.on-leaderboard").get_by_role("button", name="Unpin")).to_be_visible()
    expect(page.locator("#model-runs tbody tr.on-leaderboard").get_by_text("(pinned)")).to_be_visible()


@pytest.mark.parametrize("javascript", [True, False])
def test_a_phone_folds_the_signed_in_navigation_into_a_one_line_menu(browser_page, live_server, maintainer, javascript):
    page, base = browser_page, live_server.url
    context = page.context.browser.new_context(java_script_enabled=javascript, viewport=PHONE)
    page = context.new_page()
    sign_in(page, base, maintainer)
    page.goto(f"{base}/guides/")
    header = page.locator("header.site")
    brand = header.locator(".brand").bounding_box()
    assert header.bounding_box()["height"] <= brand["height"] + 30, "the header is one line"
    links = page.get_by_role("navigation", name="Main")
    expect(links.get_by_role("link", name="My runs")).to_be_hidden()
    shot(page, f"menu-closed-js-{javascript}")

    header.get_by_text("Menu").click()
    expect(links.get_by_role("link", name="My runs")).to_be_visible()
    expect(links.get_by_role("button", name="Log out")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    shot(page, f"menu-open-js-{javascript}")
    links.get_by_role("link", name="My runs").click()
    page.wait_for_url("**/runs/")
    context.close()
