"""In a real browser (Debian's Chromium driven by Playwright): the calibration models on the demo release show as
reference lines above the ranked entries, a column header sorts the table in place, and the per-paper view opens; at
1280 and 1366 px the key columns fit without scrolling sideways and at 390 px the page does not overflow, the column
toggle reveals a hidden column (with and without JavaScript), and the charts draw when the page is opened by link.
Screenshots go to test-artifacts/leaderboard/."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from playwright.sync_api import expect

from benchmarks.models import Snippet
from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, Generation, ModelEntry
from evaluation.outcomes import Verdict
from tests.conftest import DEMO_PSET, REPO

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ARTIFACTS = REPO / "test-artifacts" / "leaderboard"


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def calibrate(version, name: str, passed: bool) -> EvaluationRun:
    model = ModelEntry.objects.filter(name=name).first() or ModelEntry.objects.create(
        name=name, display_name=name.title(), litellm_model=f"openai/{name}"
    )
    run = services.run_start(model=model, version=version, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    verdict = Verdict("passed", "", "") if passed else Verdict("failed", "wrong_result", "assertion failed")
    for snippet in Snippet.objects.filter(task__versions=version).select_related("task"):
        generation = services.calibration_generation(run=run, snippet=snippet, sample=0)
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, generation=generation)
    assert services.run_maybe_finish(run=run)
    return run


def test_leaderboard_ranks_sorts_and_breaks_down(browser_page, live_server, media_root):
    page, base = browser_page, live_server.url
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    calibrate(version, "reference", passed=True)
    calibrate(version, "placeholder", passed=False)
    calibrate(version, "strong", passed=True)
    calibrate(version, "weak", passed=False)

    page.goto(f"{base}/")
    page.get_by_role("link", name="Leaderboard", exact=True).click()
    page.wait_for_url(f"{base}/versions/1.0.0/leaderboard/")
    lines = page.locator("#leaderboard-table tbody.reference-lines tr.calibration")
    reference = ModelEntry.objects.get(name="reference").display_name
    placeholder = ModelEntry.objects.get(name="placeholder").display_name
    assert lines.count() == 2
    assert reference in lines.nth(0).inner_text() and "100.0%" in lines.nth(0).inner_text()
    assert placeholder in lines.nth(1).inner_text() and "ref." in lines.nth(1).inner_text()
    table = page.locator("#leaderboard-table tbody.ranked tr")
    assert table.count() == 2
    assert "Strong" in table.nth(0).inner_text() and "100.0%" in table.nth(0).inner_text()
    assert "Weak" in table.nth(1).inner_text() and "0.0%" in table.nth(1).inner_text()
    # Every item tells the two apart (McNemar p = 2 / 2**items): Weak is ranked 2nd, beside its score.
    assert table.nth(0).locator("td").first.inner_text() == "1" and table.nth(1).locator("td").first.inner_text() == "2"
    # The methods paragraph moved to the guide (issue 22): the one-line summary links to it, the method in its title.
    how = page.locator("#leaderboard-summary").get_by_role("link", name="How ranks work")
    expect(how).to_be_visible()
    assert "Holm-corrected at a family-wise level of 0.05" in how.get_attribute("title")
    page.wait_for_function("document.getElementById('ranking-chart').width > 0")
    shot(page, "01-ranking")

    score_header = page.locator("#leaderboard-table thead").get_by_role("link", name="Scaled pass@1 (95% CI)")
    score_header.click()
    page.wait_for_url("**sort=score&dir=desc**")
    score_header.click()  # the current column's header flips the direction
    page.wait_for_url("**sort=score&dir=asc**")
    page.wait_for_function("document.querySelector('#leaderboard-table tbody.ranked tr').innerText.includes('Weak')")
    assert "<html" not in page.locator("#leaderboard-table").inner_html()
    assert page.locator("h1").count() == 1, "htmx swapped the table only"
    shot(page, "02-sorted-ascending")

    tabs = page.get_by_role("navigation", name="Breakdowns")
    tabs.get_by_role("link", name="By snippet size").click()
    page.locator("#breakdown").get_by_text("11+ lines").wait_for()
    # htmx settles attributes a moment after the swap: wait for it rather than read it at once.
    expect(tabs.get_by_role("link", name="By snippet size")).to_have_attribute("aria-current", "page")
    shot(page, "03-by-size")

    tabs.get_by_role("link", name="Failure categories").click()
    page.locator("#failure-table").wait_for()
    expect(tabs.get_by_role("link", name="Failure categories")).to_have_attribute("aria-current", "page")
    page.wait_for_function("(document.getElementById('failure-chart') || {}).width > 0")
    rows = page.locator("#failure-table tbody tr")
    cells = {
        rows.nth(i).locator("th").inner_text().split(" (")[0]: rows.nth(i).locator("td").all_inner_texts()
        for i in range(rows.count())
    }
    items = str(Snippet.objects.filter(task__versions=version).count())
    # Scored answers, passed, wrong result: the calibration lines too, as on the table above.
    assert cells == {
        "Reference": [items, items, "0"],
        "Placeholder": [items, "0", items],
        "Strong": [items, items, "0"],
        "Weak": [items, "0", items],
    }
    shot(page, "04-failure-categories")

    tabs.get_by_role("link", name="Per paper").click()
    heat = page.locator("#breakdown table.heatmap")
    heat.wait_for()
    expect(tabs.get_by_role("link", name="Per paper")).to_have_attribute("aria-current", "page")
    assert heat.locator("thead th").count() == 1 + version.tasks.count()
    rows = heat.locator("tbody tr")
    assert rows.nth(0).inner_text().count("100.0%") == version.tasks.count()
    assert "100.0%" not in rows.nth(1).inner_text()
    shot(page, "05-per-paper")

    page.locator("#leaderboard-table").get_by_role("link", name=reference).click()
    page.get_by_role("heading", name=reference).wait_for()
    shot(page, "06-model")
    page.locator("table a[href^='/runs/']").first.click()
    page.get_by_role("heading", name="Items").wait_for()
    page.locator("details.item").first.locator("summary").click()
    shot(page, "07-run")

    page.goto(f"{base}/versions/1.0.0/leaderboard/")
    page.get_by_role("link", name="hardest snippets of this release").click()
    page.get_by_role("heading", name="Hardest snippets of release 1.0.0").wait_for()
    rows = page.locator("#difficulty-table tbody tr")
    assert rows.count() == Snippet.objects.filter(task__versions=version).count()
    assert "1 of 2" in rows.first.inner_text()  # Strong passes every snippet, Weak none
    shot(page, "08-hardest-snippets")
    rows.first.get_by_role("link").click()
    page.locator("#difficulty").wait_for()
    shot(page, "09-paper-difficulty")


KEY_HEADERS = ("Rank", "Model", "Mode", "Scaled pass@1 (95% CI)", "pass@1 (95% CI)", "Cost", "Provenance", "Date")


def drawn(page, canvas: str) -> None:
    """Wait until leaderboard.js drew the chart on this canvas (it marks each canvas it draws)."""
    page.wait_for_function(
        f"(document.getElementById('{canvas}') || {{dataset: {{}}}}).dataset.drawn === '1' "
        f"&& document.getElementById('{canvas}').width > 0"
    )


def test_layout_at_laptop_and_phone_width(browser_page, live_server, media_root):
    page, base = browser_page, live_server.url
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    for name, passed in (("reference", True), ("placeholder", False), ("strong", True), ("weak", False)):
        calibrate(version, name, passed=passed)
    ModelEntry.objects.filter(name="strong").update(knowledge_cutoff=date(2025, 3, 1), display_name="Strong")
    ModelEntry.objects.filter(name="weak").update(knowledge_cutoff=date(2024, 6, 1), display_name="Weak")
    url = f"{base}/versions/1.0.0/leaderboard/"

    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(url)
    table = page.locator("#leaderboard-table")
    for label in KEY_HEADERS:
        header = table.locator("thead").get_by_role("link", name=label, exact=True)
        expect(header).to_be_in_viewport()
        box = header.bounding_box()
        assert box and box["x"] + box["width"] <= 1366, label
    assert page.evaluate(
        "(() => { const w = document.querySelector('#leaderboard-table'); return w.scrollWidth <= w.clientWidth; })()"
    ), "the key columns need no sideways scroll"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    summary = page.locator("#leaderboard-summary").bounding_box()
    assert summary["height"] < 30, "the summary above the table is one line"
    expect(table.locator("thead").get_by_role("link", name="Errors")).to_have_count(0)
    drawn(page, "ranking-chart")
    drawn(page, "over-time-chart")
    # Its ticks are months' firsts, each month named once (the linear axis's own ticks fell mid-month and named
    # 2025-03 three times, the 1st of March drawn left of its label).
    ticks = page.evaluate(
        "window.Chart.getChart(document.getElementById('over-time-chart')).scales.x.ticks"
        ".map((t) => new Date(t.value).toISOString().slice(0, 10))"
    )
    assert ticks and all(t.endswith("-01") for t in ticks) and len(set(ticks)) == len(ticks), ticks
    assert "2024-06-01" in ticks, ticks
    ranking, over_time = (page.locator(".charts > figure").nth(i).bounding_box() for i in (0, 1))
    assert abs(ranking["y"] - over_time["y"]) < 5 and over_time["x"] > ranking["x"] + ranking["width"] - 1, (
        "the score over time sits beside the bar chart"
    )
    shot(page, "10-layout-1366")

    toggle = page.locator("#column-toggle")
    toggle.locator("summary").click()
    toggle.get_by_label("Errors").check()  # htmx swaps the table in with the column
    page.wait_for_url("**cols=errors**")
    expect(table.locator("thead").get_by_role("link", name="Errors")).to_be_visible()
    shot(page, "11-toggle-errors")

    page.goto(f"{url}?view=failures")  # opened by link, not by its tab
    expect(
        page.get_by_role("navigation", name="Breakdowns").get_by_role("link", name="Failure categories")
    ).to_have_attribute("aria-current", "page")
    drawn(page, "failure-chart")
    drawn(page, "over-time-chart")
    shot(page, "12-failures-by-link")

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(url)
    drawn(page, "over-time-chart")
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, "no sideways page scroll"
    expect(table.locator("thead").get_by_role("link", name="Rank", exact=True)).to_be_in_viewport()
    expect(table.locator("thead").get_by_role("link", name="Model", exact=True)).to_be_in_viewport()
    shot(page, "13-layout-390")

    # Without JavaScript the toggle is a plain form: tick the box, press Apply, the page comes back with the column.
    context = page.context.browser.new_context(java_script_enabled=False, viewport={"width": 1366, "height": 900})
    plain = context.new_page()
    plain.goto(url)
    plain.locator("#column-toggle summary").click()
    plain.locator("#column-toggle").get_by_label("Tokens").check()
    plain.get_by_role("button", name="Apply").click()
    plain.wait_for_url("**cols=tokens**")
    expect(plain.locator("#leaderboard-table thead").get_by_role("link", name="Tokens")).to_be_visible()
    assert plain.locator("#leaderboard-table tbody.ranked tr").first.locator("td").last.inner_text().isdigit()
    context.close()


def test_long_model_names_keep_their_room_and_filter_labels_stay_with_their_controls(
    browser_page, live_server, media_root
):
    """The newcomer's screens: at 1366 px the Model column was squeezed to ~100 px (names on 4-5 lines), and at
    390 px each filter label sat at the end of the line before its control."""
    page, base = browser_page, live_server.url
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    calibrate(version, "reference", passed=True)
    long_name = "Claude 3.5 Sonnet (October 2024) with extended thinking"
    grouped = [calibrate(version, "sonnet", passed=passed) for passed in (True, False, True)]
    EvaluationRun.objects.filter(pk__in=[r.pk for r in grouped]).update(
        repeat_group="00000000-0000-0000-0000-000000000023"
    )
    agent = calibrate(version, "sonnet", passed=True)
    EvaluationRun.objects.filter(pk=agent.pk).update(mode="agent", repeat_group=None)
    ModelEntry.objects.filter(name="sonnet").update(display_name=long_name)
    calibrate(version, "weak", passed=False)
    url = f"{base}/versions/1.0.0/leaderboard/"

    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(url)
    table = page.locator("#leaderboard-table")
    for label in KEY_HEADERS:
        box = table.locator("thead").get_by_role("link", name=label, exact=True).bounding_box()
        assert box and box["x"] + box["width"] <= 1366, label
    assert page.evaluate(
        "(() => { const w = document.querySelector('#leaderboard-table'); return w.scrollWidth <= w.clientWidth; })()"
    ), "the key columns, Mode included, need no sideways scroll"
    cells = table.locator("tbody.ranked td[data-column=display_name]")
    for index in range(cells.count()):
        cell = cells.nth(index)
        assert cell.bounding_box()["width"] >= 200, "the Model column keeps room for its names"
        name = cell.get_by_role("link", name=long_name)
        if name.count():
            lines = name.evaluate("a => a.getClientRects().length")
            assert lines <= 2, f"a long name wraps on {lines} lines"
    modes = [t.strip() for t in table.locator("tbody.ranked td[data-column=mode]").all_inner_texts()]
    assert sorted(modes) == ["agent", "single-shot", "single-shot"]
    shot(page, "14-long-names-1366")

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(url)
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, "no sideways page scroll"
    for control in ("id_paper", "id_provenance", "id_mode", "id_q", "id_compare_a", "id_compare_b"):
        label = page.locator(f"label[for={control}]").bounding_box()
        box = page.locator(f"#{control}").bounding_box()
        middle = (label["y"] + label["height"] / 2, box["y"] + box["height"] / 2)
        assert abs(middle[0] - middle[1]) < 8, f"{control}: its label is on its line"
        assert label["x"] + label["width"] <= box["x"] + 1, f"{control}: its label stands before it"
        assert box["x"] + box["width"] <= 390, f"{control} fits the screen"
    shot(page, "15-filters-390")


def test_a_1280_px_laptop_sees_every_key_column_and_scrolls_to_a_toggled_one(browser_page, live_server, media_root):
    """The newcomer's laptop (1280 x 800): the Date column sat past the table's right edge, cut off, with the table's
    scroll bar below the last row. The key columns fit the width, the worst row included (a long name, a cost, a
    score with both its badges); a column asked for with "More columns" is reached by scrolling the table."""
    page, base = browser_page, live_server.url
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    for name, passed in (("reference", True), ("placeholder", False), ("weak", False)):
        calibrate(version, name, passed=passed)
    worst = ModelEntry.objects.create(
        name="sonnet",
        display_name="Claude 3.5 Sonnet (October 2024) with extended thinking",
        litellm_model="openai/sonnet",
        knowledge_cutoff=date(2024, 4, 1),
    )
    run = services.run_start(model=worst, version=version, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running", api_base="https://models.example.org/v1")
    run.refresh_from_db()
    flagged = Verdict(
        "flagged", "", "flagged for review", findings=({"kind": "tampering", "line": 1},), measured="passed"
    )
    for index, snippet in enumerate(Snippet.objects.filter(task__versions=version)):
        verdict = (
            flagged
            if index < 10
            else Verdict("failed", "owner_endpoint", "the model's own endpoint failed")
            if index < 20
            else Verdict("passed", "", "")
        )
        generation = services.calibration_generation(run=run, snippet=snippet, sample=0)
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, generation=generation)
    Generation.objects.filter(run=run).update(cost=Decimal("0.1234"))
    assert services.run_maybe_finish(run=run)
    url = f"{base}/versions/1.0.0/leaderboard/"

    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(url)
    table = page.locator("#leaderboard-table")
    expect(table.locator("td.score .badge.flagged")).to_have_count(1)
    expect(table.locator("td.score .badge.failed")).to_have_count(1)
    edge = page.evaluate("document.querySelector('#leaderboard-table').getBoundingClientRect().right")
    for label in KEY_HEADERS:
        box = table.locator("thead").get_by_role("link", name=label, exact=True).bounding_box()
        assert box and box["x"] + box["width"] <= edge, f"{label} ends past the table's visible edge"
    dates = table.locator("tbody td[data-column=finished_on]")
    assert dates.count() == 4
    for index in range(dates.count()):
        box = dates.nth(index).bounding_box()
        assert box and box["x"] + box["width"] <= edge, dates.nth(index).inner_text()
    assert page.evaluate(
        "(() => { const w = document.querySelector('#leaderboard-table'); return w.scrollWidth <= w.clientWidth; })()"
    ), "the key columns need no sideways scroll at 1280 px"
    expect(table.locator("thead").get_by_role("link", name="Date", exact=True)).to_be_in_viewport()
    shot(page, "14-layout-1280")

    page.goto(f"{url}?cols=organization,open_weights,knowledge_cutoff,items,errors,flagged,test_gaming,tokens")
    cutoff = table.locator("thead").get_by_role("link", name="Knowledge cut-off", exact=True)
    cutoff.scroll_into_view_if_needed()
    box = cutoff.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= 1280, "a toggled column is reached by scrolling"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), "the table scrolls, not the page"
    expect(table.locator("tbody.ranked td[data-column=knowledge_cutoff]").first).to_have_text("2024-04-01")
    shot(page, "15-toggled-1280")
